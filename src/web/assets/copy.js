// The console's only script: the copy buttons. Everything else works without it.
"use strict";
document.addEventListener("click", function (event) {
  var button = event.target.closest("button[data-copy]");
  if (!button) {
    return;
  }
  var source = document.getElementById(button.getAttribute("data-copy"));
  if (!source) {
    return;
  }
  var text = source.textContent.trim();
  function done() {
    button.setAttribute("data-copied", "true");
    button.textContent = "Copied";
  }
  function select() {
    var range = document.createRange();
    range.selectNodeContents(source);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    button.textContent = "Selected: press Ctrl+C";
  }
  if (navigator.clipboard && navigator.clipboard.writeText) {
    navigator.clipboard.writeText(text).then(done, select);
  } else {
    select();
  }
});
