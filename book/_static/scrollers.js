// Every box in the article that scrolls sideways (code, outputs, math, tables) can be reached and scrolled
// with the keyboard: it gets tabindex="0", role="region" and a label saying what it holds, and the class "scrolls"
// (book.css draws the edge shadow that shows more lies to the side). Boxes that fit lose all of it again. The theme
// (pydata-sphinx-theme) gives code and tables a tab stop, but not display math, and no box a name.
(() => {
  "use strict";
  const SELECTOR = ".bd-article pre, .bd-article div.math, .bd-article span.math, .bd-article .cell_output .output, " +
    ".bd-article .table-wrapper, .bd-article div.pst-scrollable-table-container";

  function what(box) {
    if (box.closest(".cell_input")) return "Code";
    if (box.closest(".cell_output")) return "Output";
    if (box.matches(".math")) return "Equation";
    if (box.querySelector("table")) return "Table";
    return "Code";
  }

  function scrollsSideways(box) {
    const overflow = getComputedStyle(box).overflowX;
    return (overflow === "auto" || overflow === "scroll") && box.scrollWidth > box.clientWidth + 1;
  }

  function label() {
    let count = 0;
    for (const box of document.querySelectorAll(SELECTOR)) {
      const mine = box.dataset.scrollLabel === "1";
      if (scrollsSideways(box)) {
        count += 1;
        box.classList.add("scrolls");
        box.tabIndex = 0;  // the theme does so for code and tables (not math), 300 ms after a resize
        box.setAttribute("role", "region");
        box.setAttribute("aria-label", `${what(box)} ${count}, scrolls sideways`);
        box.dataset.scrollLabel = "1";
      } else if (mine) {
        box.classList.remove("scrolls");
        for (const name of ["tabindex", "role", "aria-label", "data-scroll-label"]) box.removeAttribute(name);
      }
    }
  }

  let pending = 0;
  function soon() {
    cancelAnimationFrame(pending);
    pending = requestAnimationFrame(label);
  }

  window.bookLabelScrollers = label;  // the tests call it after resizing the window
  document.addEventListener("DOMContentLoaded", () => {
    label();
    window.addEventListener("resize", soon);
  });
  window.addEventListener("load", label);
})();
