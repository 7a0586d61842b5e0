"""What the user asks to run: training settings (training) and the precision facts derived
from them once (precision), modes, training stacks and their config files (frameworks,
framework_files, whose fields config_fields reads strictly), LoRA and QLoRA (finetune), images
(vision), what to serve (serving), the settings a model cannot take (support), which stacks can
run it (compatibility), settings that contradict each other (contradictions), and the validated
workload records (build).
"""
