// The course site's search box: works offline on the static pages. search-index.js (written by
// course_tools/site.py) sets window.TD_SEARCH_INDEX: one entry per section of every chapter, of the cheat sheet and
// of the guides, {page, kind, title, href, text, lang, grams}. Every term typed must occur in an entry; headings weigh
// most. Chinese has no spaces between words, so a run of Chinese characters typed is cut into its character bigrams
// (显存溢出: 显存, 存溢, 溢出), each looked up in the entry's `grams` (every bigram of its whole section, written by
// site.py) or its text: a two-character term is one bigram. Other words are looked up as they are typed.
(function () {
  "use strict";
  const input = document.getElementById("td-search");
  const list = document.getElementById("td-search-results");
  if (!input || !list) return;
  const CJK_RUN = /([\u3400-\u9fff\uf900-\ufaff]+)/;
  const kinds = JSON.parse(input.dataset.kinds || "{}");
  const entries = (window.TD_SEARCH_INDEX || []).map(function (e) {
    return {e: e, title: e.title.toLowerCase(), page: e.page.toLowerCase(), text: e.text.toLowerCase(),
            grams: new Set((e.grams || "").split(" "))};
  });

  function terms(query) {
    const found = [];
    for (const word of query.toLowerCase().split(/\s+/)) {
      for (const part of word.split(CJK_RUN)) {
        if (!part) continue;
        if (!CJK_RUN.test(part) || part.length === 1) { found.push(part); continue; }
        for (let i = 0; i + 2 <= part.length; i++) found.push(part.slice(i, i + 2));
      }
    }
    return found;
  }

  function search(query) {
    const wanted = terms(query);
    if (!wanted.length) return [];
    const hits = [];
    for (const entry of entries) {
      let score = 0;
      let all = true;
      for (const term of wanted) {
        const inTitle = entry.title.includes(term), inPage = entry.page.includes(term);
        const inText = entry.grams.has(term) || entry.text.includes(term);
        if (!inTitle && !inPage && !inText) { all = false; break; }
        score += (inTitle ? 10 : 0) + (inPage ? 3 : 0) + (inText ? 1 : 0);
      }
      if (all) hits.push({entry: entry, score: score});
    }
    hits.sort(function (a, b) { return b.score - a.score; });
    return hits.slice(0, 20);
  }

  function snippet(entry, query) {
    const term = terms(query)[0] || "";
    let at = Math.max(0, entry.text.indexOf(term) - 60);
    const space = entry.text.indexOf(" ", at);
    if (at > 0 && space >= 0 && space < at + 30) at = space + 1;  // start at a word where words have spaces
    const text = entry.e.text.slice(at, at + 180);
    return (at > 0 ? "… " : "") + text + (at + 180 < entry.e.text.length ? " …" : "");
  }

  function show() {
    const query = input.value.trim();
    list.textContent = "";
    if (!query) { list.hidden = true; return; }
    const hits = search(query);
    if (!hits.length) {
      const li = document.createElement("li");
      li.className = "td-no-hit";
      li.textContent = (input.dataset.nothingFound || "Nothing found for “{query}”.").replace("{query}", query);
      list.appendChild(li);
    }
    for (const hit of hits) {
      const li = document.createElement("li");
      const a = document.createElement("a");
      a.className = "td-search-hit";
      a.href = (window.TD_SEARCH_ROOT || "") + hit.entry.e.href;  // hrefs are from the site's root
      const title = document.createElement("span");
      title.className = "td-hit-title";
      title.textContent = hit.entry.e.title;
      const page = document.createElement("span");
      page.className = "td-hit-page";
      page.textContent = hit.entry.e.page + " · " + (kinds[hit.entry.e.kind] || hit.entry.e.kind)
        + (hit.entry.e.lang === "zh-CN" ? " · 中文" : "");
      const text = document.createElement("span");
      text.className = "td-hit-text";
      text.textContent = snippet(hit.entry, query);
      a.append(title, page, text);
      li.appendChild(a);
      list.appendChild(li);
    }
    list.hidden = false;
  }

  input.addEventListener("input", show);
  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter") {
      const first = list.querySelector("a.td-search-hit");
      if (first) window.location.href = first.href;
    } else if (event.key === "Escape") {
      list.hidden = true;
    }
  });
})();
