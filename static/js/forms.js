// Form behaviour once written inline in the templates: the Content-Security-Policy
// runs scripts from this site's own files only (no inline scripts or handlers).
(function () {
  "use strict";

  // Job submission: show only the GPU fields of the request form chosen (whole, fraction, memory).
  function syncGpuFields(form) {
    var checked = form.querySelector('input[name="gpu_mode"]:checked');
    var mode = checked ? checked.value : undefined;
    form.querySelectorAll("[data-gpu]").forEach(function (el) {
      el.hidden = el.dataset.gpu.split(" ").indexOf(mode) < 0;
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("form[data-gpu-modes]").forEach(function (form) {
      form.addEventListener("change", function () { syncGpuFields(form); });
      syncGpuFields(form);
    });
  });

  // A <form data-confirm="question"> asks before it is sent (cancelling a job).
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
    }
  });

  // A <select data-autosubmit> submits its form when changed (team member roles, node filters).
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target instanceof HTMLSelectElement && target.hasAttribute("data-autosubmit") && target.form) {
      target.form.submit();
    }
  });
})();
