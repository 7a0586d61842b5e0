"""The app-only settings of the pages (filters, the Cost page's switches, buy vs rent),
declared with the sidebar's, before a link is read: a shared link carries every page.

The calculators' settings (bounds, defaults, help) are declared in calculators.interface.settings;
these have no model behind them, so their default and bounds are declared here, once."""

from __future__ import annotations

from calculators.interface.settings import Setting
from ui import state

COMPARE_DEFAULT_PICK = ["H100-SXM5-80GB", "A100-SXM4-80GB"]

state.register(
    # Plan a run (0 for the deadline, budget or global batch: none given). Its tokens and epochs are the
    # run's dataset settings, shared with Time and cost (calculators.interface.settings: tokens_b, epochs).
    Setting(
        "plan_deadline_hours", "deadline_h", "Deadline (hours, 0 = none)", kind=float, default=72.0, low=0, high=1e6
    ),  # fmt: skip
    Setting("plan_budget_usd", "budget_usd", "Budget (USD, 0 = none)", kind=float, default=0.0, low=0, high=1e12),
    Setting("plan_max_gpus", "max_gpus", "Most GPUs", kind=int, default=256, low=1, high=65_536),
    Setting(
        "plan_global_batch",
        "gbatch",
        "Global batch (tokens per step, 0 = the mode's default)",
        kind=int,
        default=0,
        low=0,
        high=1 << 32,
    ),  # fmt: skip
    Setting("plan_providers", "providers", "Providers (all when empty)", kind=str, default=[], is_list=True),
    Setting("plan_spot", "spot", "Spot allowed", kind=bool, default=True),
    Setting("plan_owned", "owned", "Owned GPUs too", kind=bool, default=False, help="also price owning the GPUs"),
    Setting(
        "plan_pessimistic",
        "pessimistic",
        "Judge on the high end of each range",
        kind=bool,
        default=False,
        help="Meet the deadline and budget, and rank, with each plan's slowest and dearest figure: the time "
        "model's largest measured error for the GPU family, more interruptions and dearer regions on spot",
    ),
    # the plan chosen on the front, 1 = fastest (0: none yet); a link with one searches on opening
    Setting("plan_chosen", "plan", "Plan", kind=int, default=0, low=0, high=100_000),
    # Compare GPUs
    Setting("cmp_vendors", "vendors", "Vendor (all when empty)", kind=str, default=[], is_list=True),
    Setting("cmp_categories", "categories", "Category (all when empty)", kind=str, default=[], is_list=True),
    Setting("cmp_min_memory", "min_gb", "Memory at least (GB)", kind=int, default=0, low=0, high=2000),
    Setting("cmp_fits_only", "cmp_fits", "Fits and runs the workload on one GPU", kind=bool, default=False),
    Setting("cmp_pick", "pick", "Pick 2 to 4 GPUs", kind=str, default=COMPARE_DEFAULT_PICK, is_list=True),
    # Time and cost
    Setting("cost_dataset_unit", "unit", "Dataset size in", kind=str, default="tokens", options=("tokens", "samples")),
    Setting(
        "cost_override_rate",
        "rate_set",
        "My own rate",
        kind=bool,
        default=False,
        help="Set the spot interruption rate below yourself instead of the price sheet's",
    ),
    Setting("cost_fits_only", "fits_only", "Only GPUs the workload fits on", kind=bool, default=True),
    Setting("cost_only_mine", "only_mine", "Use only my price sheet", kind=bool, default=False),
    # Calibration (the budget and price are checked again by the runner before a run)
    Setting("cal_device", "cal_device", "Device", kind=str, default="auto", options=("auto", "cuda", "cpu")),
    Setting("cal_budget_s", "cal_budget", "Time budget (s)", kind=int, default=110, low=5, high=600),
    Setting(
        "cal_usd_per_hour",
        "cal_usd",
        "Price per GPU-hour for cost per epoch (USD)",
        kind=float,
        default=2.0,
        low=0,
        high=1000,
    ),  # fmt: skip
    Setting("use_calibration", "use_cal", "Use this calibration", kind=bool, default=False),
    # Buy vs rent: the GPU (the figures are OwnershipSettings', in calculators.interface.settings)
    Setting("cost_buy_gpu", "buy_gpu", "GPU", kind=str, default=""),
)
