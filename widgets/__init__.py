"""Live views of speculative decoding (ipywidgets + plotly). Depends on `lab`; `lab` never imports widgets."""
from widgets.arena import arena_figure
from widgets.jacobi import JacobiViewer
from widgets.kv_viewer import KVCacheViewer
from widgets.picker import StrategyPicker
from widgets.race import RaceDashboard
from widgets.residual import ResidualExplorer
from widgets.speedup import SpeedupExplorer
from widgets.token_stream import TokenStream
from widgets.tree_viewer import TreeViewer

__all__ = ["JacobiViewer", "KVCacheViewer", "RaceDashboard", "ResidualExplorer", "SpeedupExplorer", "StrategyPicker",
           "TokenStream", "TreeViewer", "arena_figure"]
