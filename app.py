"""GPU sizing and cost: the entry point (`streamlit run app.py`).

The sidebar holds the workload shared by the pages that answer for one (Plan, Memory, Compare,
Time and cost); Calibration and Validation do not use it, so it is not drawn there (its values
stay kept, and in the link). Pages live in app_pages/ (not pages/, which streamlit would also
run on its own for a deep link).
"""

import streamlit as st

from ui import state
from ui.heap import freeze_loaded_objects
from ui.layout import close_sidebar_on_narrow_window
from ui.workload import workload_sidebar

st.set_page_config(page_title="GPU sizing and cost", page_icon=":material/memory:", layout="wide")

# url_path -> whether the page reads the sidebar's workload
WORKLOAD_PAGES = {"": True, "memory": True, "compare": True, "cost": True, "calibration": False, "validation": False}

navigation = st.navigation(
    [
        st.Page("app_pages/plan.py", title="Plan a run", icon=":material/event_available:", default=True),
        st.Page("app_pages/memory.py", title="Memory", icon=":material/memory:", url_path="memory"),
        st.Page("app_pages/compare.py", title="Compare GPUs", icon=":material/compare:", url_path="compare"),
        st.Page("app_pages/cost.py", title="Time and cost", icon=":material/payments:", url_path="cost"),
        st.Page("app_pages/calibration.py", title="Calibration", icon=":material/speed:", url_path="calibration"),
        st.Page("app_pages/validation.py", title="Validation", icon=":material/fact_check:", url_path="validation"),
    ]
)
state.load_from_url()  # on whichever page a link opens, the workload's settings included
if WORKLOAD_PAGES.get(navigation.url_path, True):
    st.session_state["workload"] = workload_sidebar()
else:
    st.sidebar.caption("The workload settings are on Plan, Memory, Compare and Time and cost; they are kept.")
close_sidebar_on_narrow_window()
for warning in state.url_warnings():
    st.warning(warning)
# The link is written at the top, before the page runs: a user's change reaches the kept values in its
# widget's callback, before this run, so this write carries it whatever the page does next. It must come
# first because a page that calls st.stop() (Memory and Compare in Serve, Plan before a search, a page
# with a sidebar error) sends nothing more: streamlit handles the pending stop at the next message, so
# the write in `finally` raises before it reaches the browser. That second write is for pages that run
# to the end and set a value themselves (the plan chosen after a search, a link's unknown GPU replaced).
state.save_to_url()
try:
    navigation.run()
finally:
    state.save_to_url()
    freeze_loaded_objects()  # once per process: what the first run loaded stays out of later collections
