// Browser half of TokenStream (widgets/token_stream.py), an anywidget module.
// The model holds `tokens`, compact dicts: s display text, k kind, p the generated position a click selects
// (-1: not selectable), i token id, n step (-1 for the prompt), t tooltip, x true for a special token (drawn as a
// badge); and `selected`, a generated position (-1 for none). Token text is data: it is only ever set with
// textContent, never parsed as HTML.

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "sdl-stream";
  el.appendChild(root);

  function draw() {
    // Redrawing replaces every span: note which one has the keyboard focus (Enter/Space on a token, then a live
    // step) to give it back, or the focus falls to the page body.
    const active = document.activeElement;
    const focusAt = active && root.contains(active) ? Array.prototype.indexOf.call(root.children, active) : -1;
    const focusPos = focusAt >= 0 ? active.dataset.pos : undefined;
    const selected = model.get("selected");
    const spans = [];
    for (const token of model.get("tokens")) {
      const span = document.createElement("span");
      span.className = "sdl-tok sdl-" + token.k;
      span.textContent = token.s;  // token text is data: never parsed as HTML
      span.title = token.t;
      if (token.x) span.classList.add("sdl-special");
      if (token.p >= 0) {
        span.dataset.pos = String(token.p);
        span.tabIndex = 0;
        span.setAttribute("role", "button");
        if (token.p === selected && token.k !== "rejected") span.classList.add("sdl-selected");
      }
      spans.push(span);
    }
    root.replaceChildren(...spans);
    if (focusPos !== undefined) {  // the same span if it is still there (several spans can share a data-pos)
      const same = spans[focusAt] && spans[focusAt].dataset.pos === focusPos;
      const again = same ? spans[focusAt] : spans.find((span) => span.dataset.pos === focusPos);
      if (again) again.focus();
    }
  }

  function choose(event) {
    const span = event.target.closest("[data-pos]");
    if (!span || !root.contains(span)) return;
    model.set("selected", Number(span.dataset.pos));
    model.save_changes();
  }
  function onKey(event) {
    if (event.key === "Enter" || event.key === " ") { event.preventDefault(); choose(event); }
  }

  root.addEventListener("click", choose);
  root.addEventListener("keydown", onKey);
  model.on("change:tokens", draw);
  model.on("change:selected", draw);
  draw();
  return () => {
    model.off("change:tokens", draw);
    model.off("change:selected", draw);
  };
}

export default { render };
