// Browser half of TokenStream (widgets/token_stream.py), an anywidget module.
// The model holds `tokens` and `tail`, lists of compact dicts: s display text, k kind, p the generated position a
// click selects (-1: not selectable), i token id, n step (-1 for the prompt), t tooltip, x true for a special token
// (drawn as a badge); and `selected`, a generated position (-1 for none). The stream shows tokens, then tail: a live
// step changes only `tail` (the newest tokens), so a step costs the same at token 1,000 as at token 10; `tokens`
// changes when the kernel moves a long tail into it, or for a new run. Token text is data: it is only ever set
// with textContent, never parsed as HTML.

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "sdl-stream";
  el.appendChild(root);
  let drawn = null;  // the `tokens` list the first spans were made from
  let drawnCount = 0;  // how many spans it made; the tail's spans follow

  function span(token, selected) {
    const node = document.createElement("span");
    node.className = "sdl-tok sdl-" + token.k;
    node.textContent = token.s;  // token text is data: never parsed as HTML
    node.title = token.t;
    if (token.x) node.classList.add("sdl-special");
    if (token.p >= 0) {
      node.dataset.pos = String(token.p);
      node.tabIndex = 0;
      node.setAttribute("role", "button");
      if (token.p === selected && token.k !== "rejected") node.classList.add("sdl-selected");
    }
    return node;
  }

  // Redrawing replaces spans: note which one has the keyboard focus (Enter/Space on a token, then a live step) to
  // give it back afterwards, or the focus falls to the page body.
  function focused() {
    const active = document.activeElement;
    const at = active && root.contains(active) ? Array.prototype.indexOf.call(root.children, active) : -1;
    return at >= 0 ? { at, pos: active.dataset.pos } : null;
  }
  function refocus(saved) {
    if (!saved) return;
    const spans = Array.from(root.children);  // the same span if it is still there (several can share a data-pos)
    const again = spans[saved.at] && spans[saved.at].dataset.pos === saved.pos
      ? spans[saved.at] : spans.find((node) => node.dataset.pos === saved.pos);
    if (again && again !== document.activeElement) again.focus();
  }

  function draw() {  // every span: a new `tokens` list, or a new selection
    const saved = focused();
    const selected = model.get("selected");
    drawn = model.get("tokens");
    const head = drawn.map((token) => span(token, selected));
    drawnCount = head.length;
    root.replaceChildren(...head, ...(model.get("tail") || []).map((token) => span(token, selected)));
    refocus(saved);
  }

  function drawTail() {  // the spans after `tokens` only
    if (model.get("tokens") !== drawn) { draw(); return; }
    const saved = focused();
    const selected = model.get("selected");
    for (let i = root.children.length - 1; i >= drawnCount; i -= 1) root.children[i].remove();
    for (const token of model.get("tail") || []) root.appendChild(span(token, selected));
    refocus(saved);
  }

  function choose(event) {
    const node = event.target.closest("[data-pos]");
    if (!node || !root.contains(node)) return;
    model.set("selected", Number(node.dataset.pos));
    model.save_changes();
  }
  function onKey(event) {
    if (event.key === "Enter" || event.key === " ") { event.preventDefault(); choose(event); }
  }

  root.addEventListener("click", choose);
  root.addEventListener("keydown", onKey);
  model.on("change:tokens", draw);
  model.on("change:tail", drawTail);
  model.on("change:selected", draw);
  draw();
  return () => {
    model.off("change:tokens", draw);
    model.off("change:tail", drawTail);
    model.off("change:selected", draw);
  };
}

export default { render };
