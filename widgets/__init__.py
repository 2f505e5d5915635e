"""Live views of speculative decoding (ipywidgets + plotly). Depends on `lab`; `lab` never imports widgets."""
from widgets.token_stream import TokenStream

__all__ = ["TokenStream"]
