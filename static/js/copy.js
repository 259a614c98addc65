// Copy buttons: <button data-copy="ELEMENT-ID"> puts that element's text on the clipboard and says
// so in its own label for a moment (the token page's new secret). A file of its own: the
// Content-Security-Policy runs no inline script.
(function () {
  "use strict";

  function said(button, text) {
    var label = button.dataset.label || button.textContent;
    button.dataset.label = label;
    button.textContent = text;
    window.setTimeout(function () { button.textContent = label; }, 2000);
  }

  // Without the Clipboard API (a page served over plain HTTP off localhost): select the text,
  // so Ctrl+C copies it.
  function selectText(element) {
    var range = document.createRange();
    range.selectNodeContents(element);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button[data-copy]") : null;
    if (!button) return;
    var source = document.getElementById(button.dataset.copy);
    if (!source) return;
    var text = source.textContent.trim();
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        function () { said(button, "Copied"); },
        function () { selectText(source); said(button, "Press Ctrl+C"); }
      );
    } else {
      selectText(source);
      said(button, "Press Ctrl+C");
    }
  });
})();
