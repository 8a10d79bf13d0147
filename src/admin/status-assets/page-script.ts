/**
 * The status page's script, served as a same-origin file (the CSP forbids inline script). It
 * keeps the page live without reloading it: every few seconds, after typing in the search box,
 * changing a filter or following a link in the page, it fetches /status/fragment with the form's
 * values and swaps in the part below the form — the form itself (and what the operator typed)
 * is never replaced. A refresh is skipped while the operator is selecting text in the page.
 * Plain ES2020, no framework; without it the form and links work as ordinary navigation.
 */
export const STATUS_PAGE_SCRIPT = `"use strict";
(() => {
  const form = document.getElementById("filters");
  const live = document.getElementById("live");
  const state = document.getElementById("refresh-state");
  if (!form || !live || !state) return;
  const refreshMs = Number(document.body.dataset.refreshSeconds || "5") * 1000;
  const fields = ["q", "state", "mode", "sort", "upstream"];
  let offset = Number(new URLSearchParams(location.search).get("offset") || "0");
  let sequence = 0;
  let timer = 0;
  let debounce = 0;
  let inflight = null;

  function currentParams() {
    const params = new URLSearchParams();
    for (const name of fields) {
      const field = form.elements.namedItem(name);
      if (field && field.value) params.set(name, field.value);
    }
    if (offset > 0) params.set("offset", String(offset));
    return params;
  }

  function selectingInPage() {
    const selection = window.getSelection();
    return selection !== null && !selection.isCollapsed && live.contains(selection.anchorNode);
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(() => refresh("timer"), refreshMs);
  }

  async function refresh(reason) {
    const params = currentParams();
    const mine = ++sequence;
    if (inflight) inflight.abort();
    const controller = new AbortController();
    inflight = controller;
    try {
      const response = await fetch("/status/fragment?" + params.toString(), {
        headers: { accept: "text/html" },
        cache: "no-store",
        signal: controller.signal,
      });
      if (!response.ok) throw new Error("HTTP " + response.status);
      const html = await response.text();
      if (mine !== sequence || (reason === "timer" && selectingInPage())) return;
      live.innerHTML = html;
      if (reason !== "timer") {
        const query = params.toString();
        history.replaceState(null, "", query ? "/status?" + query : "/status");
      }
      state.textContent = "updated " + new Date().toLocaleTimeString();
      state.classList.remove("error");
      document.body.dataset.refreshes = String(mine);
    } catch (error) {
      if (error && error.name === "AbortError") return;
      state.textContent = "refresh failed (" + (error && error.message) + "), retrying";
      state.classList.add("error");
    } finally {
      if (inflight === controller) inflight = null;
      if (mine === sequence) schedule();
    }
  }

  form.addEventListener("input", (event) => {
    offset = 0;
    clearTimeout(debounce);
    const typing = event.target && event.target.type === "search";
    debounce = setTimeout(() => refresh("input"), typing ? 200 : 0);
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    offset = 0;
    refresh("input");
  });
  live.addEventListener("click", (event) => {
    const anchor = event.target instanceof Element ? event.target.closest("a[data-nav]") : null;
    if (!anchor || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    const params = new URL(anchor.href).searchParams;
    for (const name of fields) {
      const field = form.elements.namedItem(name);
      // A parameter left out of a link is its default: the select's first option, or empty.
      if (field) field.value = params.get(name) || (field.options ? field.options[0].value : "");
    }
    offset = Number(params.get("offset") || "0");
    refresh("navigation");
  });
  schedule();
})();
`;
