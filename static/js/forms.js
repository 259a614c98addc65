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

  // A form with a live htmx check (the submit form's fit check) that is itself submitted the
  // ordinary way: once it is sent, no new check starts (the blur of the last field edited would
  // start one as the page leaves), and a check in flight is let finish first (a fraction of a
  // second; leaving the page would cut it off, a failed request in the browser).
  document.addEventListener("htmx:confirm", function (event) {
    var elt = event.detail && event.detail.elt;
    if (elt instanceof HTMLFormElement && elt.dataset.sending) {
      event.preventDefault();
    }
  });
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("hx-post") || event.defaultPrevented) {
      return;
    }
    form.dataset.sending = "1";
    if (form.classList.contains("htmx-request") && !form.dataset.waited) {
      event.preventDefault();
      form.dataset.waited = "1";  // once: never hold a submission twice
      var submitter = event.submitter;
      form.addEventListener("htmx:afterRequest", function () {
        // After htmx has finished with the response (indicator classes removed).
        window.setTimeout(function () { form.requestSubmit(submitter || undefined); }, 0);
      }, { once: true });
    }
  });

  // A page brought back by the Back button is live again: its checks may run.
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) {
      document.querySelectorAll("form[data-sending]").forEach(function (form) {
        delete form.dataset.sending;
        delete form.dataset.waited;
      });
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
