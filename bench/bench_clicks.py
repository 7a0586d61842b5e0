"""Times a sidebar change in a real browser: from the change of the micro-batch until the page is
idle again, on Memory, Compare, Time and cost and Plan, against a one-widget Streamlit page
measured in the same run on the same machine.

Goal (issue 36): every page within 2x the one-widget page. Run from the repository root:

    HF_HUB_OFFLINE=1 python bench/bench_clicks.py [--clicks 8] [--pages memory,cost]

It starts three servers (the app, and a one-number-input page written to a temp folder, run twice:
with Streamlit's default settings, the issue's reference, and with the app's own
.streamlit/config.toml), drives Debian's Chromium (/usr/bin/chromium) headless with Playwright, and
prints the median and max per page and the ratio of each page to the references'. The default page
spends 50-70 ms of its ~110 ms in the full garbage collection Streamlit runs after every run
(runner.postScriptGC, which holds the GIL, so nothing of the run reaches the browser before it
ends); the app turns it off, so against the one-widget page under the same settings (~55 ms) every
page is about 3x.

The idle signal, in two parts, both read in the page (TAP_JS, installed before Streamlit's own
script). (1) The server's own word: the page's websocket messages are counted as they arrive, and
the rerun the change asked for is over when a "script finished" ForwardMsg arrives (the root
element's `data-test-script-state` alone proved unreliable: a short rerun can go from "notRunning"
to "notRunning" with no "running" rendered in between, so a watcher of it waits for ever). (2) The
browser's share: then, until no element is marked stale (`data-stale="true"`: drawn by the previous
run and not yet redrawn), the status widget's running icon is gone and the script state is not
"running", and after that two requestAnimationFrame callbacks in a row: they run only once the main
thread is free of the React and Plotly work the rerun caused, so laying out tables and drawing
figures count. The time is from the Enter key that commits the number (its keydown in the page) to
that second frame. Until 2026-11-27 20:30 UTC the websocket was tapped here instead (Playwright's
`framereceived`): every frame of a rerun then crossed the DevTools protocol and was parsed in this
process, on the two cores the server and Chromium use, which charged a page of many elements more
than the one-widget page (Memory, fresh values, 2.5x tapped against 1.9-2.1x read in the page, the
app unchanged).
Each page is brought to the front before its change: a page behind another gets no frames.

Where the time went (issue 36, this 2-core machine; py-spy and cProfile of the server, Chromium's CPU
profile, the server's and the renderer's CPU time per change): server, browser and this script share
the two cores, so what either side saves shortens the other's wait too.
- streamlit's full garbage collection after every run (120-150 ms; off in .streamlit/config.toml).
- React redraws every element a run sends, changed or not: about 2-4 ms of renderer CPU each, and
  each is a message the server queues and writes. A closed section's headings, captions, file box and
  empty columns were still sent (8 of the sidebar's 24 elements on every page, 9 more on Time and
  cost); now nothing but its title (ui/state.section, state.columns). What a reader may never open
  is drawn only while open: tables, the roofline, MLPerf Training, Time and cost's chart, buy or rent.
- A Plotly chart whose data change is mounted afresh (streamlit 1.67 keys it by a hash of the figure,
  `key` or not; its component reads the figure only when mounted, so a fixed id would leave the old
  chart drawn) and the mounted component draws it twice (once at
  its container's width, once after its mount effect hands Plotly a JSON copy): about 40 ms of
  renderer CPU a draw on Memory, 80 of its ~210 ms per change. Its y axis's automargin added a
  second Plotly pass to each draw (about 13 of 30 ms in a bare page): a fixed margin now. A chart
  whose figure does not change (Compare's scatters) keeps its id and is not redrawn.
- Server work that does not depend on the change is kept (ui/memo.remembered): Compare's catalogue
  table, MLPerf table and chart; Time and cost's options table; the price rows (not copied when
  nothing adjusts them).
Before -> after (x one-widget page; main at 16:35 and 16:47 UTC with 8 changes, this branch at
17:24 and 17:38 with 16): Memory 2.3-2.5 -> 1.9, Compare 2.0-2.1 -> 1.7, Time and cost 1.8-1.9 ->
1.6-1.7, Plan 1.4 -> 1.2-1.3. Runs of 8 spread by about 0.2 (Memory 1.8-2.1).

Values never seen (--fresh), 2026-11-27 (16 changes a page, medians of runs of one session):
- The memory charts are Vega-Lite (ui/memory_chart.py): a Plotly chart whose figure changes is
  mounted afresh and drawn twice, about 80 ms a change here; Vega keeps the chart and swaps its data.
  Memory 2.4-2.6 -> 1.8-2.0 with nothing else changed (two runs each, alternated).
- The search behind 'What to change' reads the engine's numbers without its report and the time
  model keeps what depends on the workload alone (bench/bench_changes.py, bench/bench_time.py;
  results identical, bench/engine_equivalence.py, bench/time_equivalence.py).
- gc.freeze after the first run (ui/heap.py): full collections walked ~180,000 long-lived objects
  on one change in three to five, 50-100 ms each.
- Time and cost draws 7 fewer widgets (throughput and interruptions in a section whose title sums
  them up); Compare's side by side is a static table.
Start of the session (18:26 UTC) -> end (19:20-19:36 UTC, two series of three runs):
  Memory 2.8 -> 2.0-2.2 and 2.3-2.6; Compare 2.0 -> 2.1-2.2 and 2.1-2.4; Time and cost 2.4 -> 1.7 and
  1.9-2.0; Plan 1.3-1.6 throughout. Change and undo (1, 2, 1, 2) at the end: Memory 1.5-1.7, Compare
  1.6-1.8, Time and cost 1.6-1.7, Plan 1.3-1.6. The two series differ by up to 0.4 on Memory with no
  change of code between them: this 2-core machine runs the server, Chromium and the driver at once,
  and a ratio near 2 cannot be told from 2 by fewer than several runs.

Later the same day (20:30-21:45 UTC), the tap read in the page and the second reference added:
- What a change costs now, per process (/proc CPU time over 16 fresh changes on Memory): server
  ~57 ms, Chromium ~230 ms (its renderer ~195), against ~49 (mostly the post-run collection) and
  ~50 for the default one-widget page. Most of a change is the browser redrawing what changed.
- st.table drew each cell as its own Markdown element: the side-by-side table and What to change are
  one Markdown table each (ui.layout.light_table). Compare's scatters keep their converted form
  (ui.charts.FinishedFigure) and its table is built in Python; Time and cost prices only the rows
  of its table on each change; the search behind What to change leaves out, by a proven floor of the
  peak, the combinations that cannot fit (calculators.memory.engine.peak_floor_gib).
- Five series of 16 fresh changes at 21:38-21:55 UTC (x default one-widget page, median of the
  medians / the paired median): Memory 2.1/1.8, 1.7/1.7, 1.5/1.7, 1.5/1.6, 1.6/1.8; Compare 1.7/1.7,
  1.4/1.6, 1.7/1.6, 1.6/1.5, 1.7/1.6; Time and cost 1.4/1.4, 1.5/1.6, 1.8/1.7, 1.7/1.6, 1.9/1.8; Plan
  1.2-1.4 / 1.2-1.3. Change and undo: 1.4-1.6 on every page. Against the one-widget page under the
  app's settings: 2.3-3.8.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from tests.browser.streamlit_server import start_streamlit, stop_streamlit  # noqa: E402

CHROMIUM_PATH = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
PAGES = {"memory": "Memory", "compare": "Compare", "cost": "Time and cost", "plan": "Plan"}
URL_PATH = {"memory": "memory", "compare": "compare", "cost": "cost", "plan": ""}  # Plan is the landing page
REFERENCE_SCRIPT = 'import streamlit as st\n\nst.number_input("Micro-batch", min_value=1, value=1)\n'
STARTUP_TIMEOUT_S = 90
IDLE_TIMEOUT_MS = 60_000

# Installed in each page before Streamlit's own script runs: counts the server's "script finished"
# messages (a ForwardMsg whose top-level field 6 is set: streamlit/proto/ForwardMsg.proto) as the page
# receives them, and notes when the Enter key goes down. Read in the page, the signal costs the same
# for every page: a tap in this script (Playwright's `framereceived`) had each of a rerun's frames
# sent over the DevTools protocol and parsed here, on the cores the server and the browser share, so
# a page of many elements paid for the instrument more than the one-widget page did.
TAP_JS = """
(() => {
  window.__runsFinished = 0;
  window.__finishedAt = 0;
  window.__enterAt = 0;
  const varint = (bytes, at) => {
    let value = 0, shift = 0, byte;
    do { byte = bytes[at++]; value += (byte & 0x7f) * 2 ** shift; shift += 7; } while (byte & 0x80);
    return [value, at];
  };
  const isScriptFinished = (bytes) => {  // walks the top-level fields of one ForwardMsg
    let at = 0, tag, size;
    while (at < bytes.length) {
      [tag, at] = varint(bytes, at);
      if (tag >>> 3 === 6) return true;
      const wire = tag & 7;
      if (wire === 0) [, at] = varint(bytes, at);
      else if (wire === 1) at += 8;
      else if (wire === 5) at += 4;
      else if (wire === 2) { [size, at] = varint(bytes, at); at += size; }
      else return false;
    }
    return false;
  };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (event) => {
        if (event.data instanceof ArrayBuffer && isScriptFinished(new Uint8Array(event.data))) {
          window.__runsFinished += 1;
          window.__finishedAt = performance.now();
        }
      });
    }
  };
  window.addEventListener("keydown", (event) => {
    if (event.key === "Enter") window.__enterAt = performance.now();
  }, true);
})();
"""

# After the change: resolves, with the seconds from the Enter key to the server's "script finished"
# and to the settled page, once a run has finished since `seen`, nothing is stale and two frames ran.
CHANGE_DONE_JS = """
([seen, timeoutMs]) => new Promise((resolve, reject) => {
  setTimeout(() => reject(new Error(`no rerun finished within ${timeoutMs / 1000} s of the change`)), timeoutMs);
  const busy = () =>
    window.__runsFinished <= seen ||
    document.querySelector('[data-testid="stApp"]').getAttribute('data-test-script-state') === 'running' ||
    document.querySelector('[data-stale="true"]') !== null ||
    document.querySelector('[data-testid="stStatusWidgetRunningIcon"]') !== null;
  const again = () => {
    if (busy()) { requestAnimationFrame(again); return; }
    requestAnimationFrame(() => requestAnimationFrame(() => {
      if (busy()) { again(); return; }
      const now = performance.now();
      resolve([(now - window.__enterAt) / 1000, (window.__finishedAt - window.__enterAt) / 1000]);
    }));
  };
  again();
})
"""


def wait_idle(page) -> None:
    """Until the first load (or a change) has finished: not running, nothing stale."""
    page.wait_for_function(
        """() => {
          const root = document.querySelector('[data-testid="stApp"]');
          return root && root.getAttribute('data-test-script-state') === 'notRunning'
            && document.querySelector('[data-stale="true"]') === null;
        }""",
        timeout=IDLE_TIMEOUT_MS,
    )


def one_click_s(page, number_input, value: int) -> tuple[float, float]:
    """Seconds from the Enter key that commits `value` in the number input until the page is idle,
    and until the server's "script finished" reached the page (the rest is the browser's), both
    timed in the page."""
    page.bring_to_front()  # a page behind another gets no animation frames, and the idle signal waits on them
    number_input.fill(str(value))
    seen = page.evaluate("window.__runsFinished")
    number_input.press("Enter")
    total_s, server_s = page.evaluate(CHANGE_DONE_JS, [seen, IDLE_TIMEOUT_MS])
    return total_s, server_s


def open_page(browser, url: str, sidebar: bool):
    """A fresh 1400 x 1000 page at `url`, idle, with the tap installed, and its micro-batch input."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.add_init_script(TAP_JS)
    page.goto(url)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=IDLE_TIMEOUT_MS)
    scope = page.get_by_test_id("stSidebar") if sidebar else page.get_by_test_id("stMain")
    number_input = scope.get_by_label("Micro-batch", exact=True)
    number_input.wait_for(timeout=IDLE_TIMEOUT_MS)
    wait_idle(page)
    page.wait_for_timeout(500)  # let late figures finish drawing before the first change
    return context, page, number_input


# The two one-widget pages: Streamlit's defaults (the reference: 0.11-0.13 s when it was
# filed), and the same page under this app's .streamlit/config.toml. The defaults run a full garbage
# collection after every run (runner.postScriptGC) in the script thread, holding the GIL, so the
# server sends nothing of that run until it ends: 50-70 ms of the default page's ~110 ms here. The
# app turns it off; the second reference shows what a page of one widget takes without it.
REFERENCES = {"reference": "one widget", "same_settings": "one widget*"}


def time_pages(urls: dict[str, str], pages: list[str], clicks: int, fresh: bool) -> dict[str, list[tuple]]:
    """Per page and for each reference: `clicks` timed changes, the page and the references
    alternating so that load from other processes falls on all alike. The micro-batch goes
    1, 2, 1, 2 (a change and its undo, as a person trying a value does), or with `fresh` 3, 4,
    5, ...: values the session has not seen, so nothing the page kept from an earlier run applies."""
    from playwright.sync_api import sync_playwright

    times: dict[str, list[tuple[float, float]]] = {name: [] for name in REFERENCES}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, headless=True, args=CHROMIUM_ARGS)
        references = {name: open_page(browser, urls[name], sidebar=False) for name in REFERENCES}
        for _, ref_page, ref_input in references.values():
            one_click_s(ref_page, ref_input, 2)  # warm-up, not counted
        for name in pages:
            print(f"timing {PAGES[name]} ...", file=sys.stderr, flush=True)
            url = f"{urls['app']}/{URL_PATH[name]}?model=llama-2-7b"
            context, page, number_input = open_page(browser, url, sidebar=True)
            one_click_s(page, number_input, 2)  # warm-up: first-use imports and caches
            times[name] = []
            for click in range(clicks):
                value = click + 3 if fresh else 1 + click % 2  # each click a real change
                times[name].append(one_click_s(page, number_input, value))
                for ref_name, (_, ref_page, ref_input) in references.items():
                    times[ref_name].append(one_click_s(ref_page, ref_input, value))
            context.close()
        for ref_context, _, _ in references.values():
            ref_context.close()
        browser.close()
    return times


def paired_ratio(totals: list[float], reference_totals: list[float]) -> str:
    """Median (q1-q3) of each change's time over the reference's change timed right after it."""
    ratios = [total / ref for total, ref in zip(totals, reference_totals, strict=True)]
    low, middle, high = statistics.quantiles(ratios, n=4)
    return f"{middle:.1f} ({low:.1f}-{high:.1f})"


def report(times: dict[str, list[tuple[float, float]]]) -> str:
    """Per page: median and max seconds to idle, the median of those till the server's "script
    finished", and the ratio of the median to the default one-widget page's (the issue's goal: 2x).
    Then the ratio click by click: each change of the page over the one-widget page's change timed
    right after it (time_pages alternates them), whose median and quartiles drift less when the
    machine's speed does; and the same over the one-widget page under the app's own settings."""
    totals_of = {name: [total for total, _ in values] for name, values in times.items()}
    reference = statistics.median(totals_of["reference"])
    header = (
        f"{'page':<14} {'median s':>9} {'max s':>7} {'server s':>9} {'x reference':>12} {'x paired (q1-q3)':>18}"
        f" {'x one widget* (q1-q3)':>22}"
    )
    lines = [header]
    pages = [name for name in times if name not in REFERENCES]
    for name, values in times.items():
        totals = totals_of[name]
        median = statistics.median(totals)
        server = statistics.median(server for _, server in values)
        paired = same = ""
        if name in pages and len(totals) >= 2:
            start = pages.index(name) * len(totals)  # the one-widget changes timed beside this page's
            beside = slice(start, start + len(totals))
            paired = paired_ratio(totals, totals_of["reference"][beside])
            same = paired_ratio(totals, totals_of["same_settings"][beside])
        label = REFERENCES.get(name) or PAGES[name]
        lines.append(
            f"{label:<14} {median:>9.3f} {max(totals):>7.3f} {server:>9.3f} {median / reference:>12.1f} {paired:>18}"
            f" {same:>22}"
        )
    lines.append("one widget: Streamlit's default settings; one widget*: the app's (.streamlit/config.toml)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clicks", type=int, default=8, help="timed changes per page (default 8)")
    parser.add_argument("--fresh", action="store_true", help="a micro-batch never used before on each change")
    parser.add_argument("--pages", default=",".join(PAGES), help="comma-separated: memory,compare,cost,plan")
    args = parser.parse_args()
    pages = [name for name in args.pages.split(",") if name]
    unknown = [name for name in pages if name not in PAGES]
    if unknown:
        parser.error(f"unknown page {', '.join(unknown)}; choose from {', '.join(PAGES)}")
    with tempfile.TemporaryDirectory() as folder:
        offline = {"HF_HUB_OFFLINE": "1"}
        servers, urls = [], {}
        try:
            for name, cwd in (("app", REPO_ROOT), *((ref, one_widget_folder(Path(folder), ref)) for ref in REFERENCES)):
                script = REPO_ROOT / "app.py" if name == "app" else cwd / "one_widget.py"
                process, urls[name] = start_streamlit(script, cwd, STARTUP_TIMEOUT_S, offline)
                servers.append(process)
            times = time_pages(urls, pages, args.clicks, args.fresh)
        finally:
            for process in servers:
                stop_streamlit(process)
    values = "fresh values" if args.fresh else "1, 2, 1, 2"
    print(f"{args.clicks} changes of the micro-batch ({values}) per page, Chromium 1400 x 1000, {os.cpu_count()} CPUs")
    print(report(times))


def one_widget_folder(parent: Path, name: str) -> Path:
    """A folder holding the one-widget script; for `same_settings`, with a copy of the app's
    .streamlit/config.toml (streamlit reads it from the folder it runs in)."""
    folder = parent / name
    folder.mkdir()
    (folder / "one_widget.py").write_text(REFERENCE_SCRIPT)
    if name == "same_settings":
        (folder / ".streamlit").mkdir()
        (folder / ".streamlit" / "config.toml").write_text((REPO_ROOT / ".streamlit" / "config.toml").read_text())
    return folder


if __name__ == "__main__":
    main()
