"""What a model is: its architecture record (spec), the shapes and parameter counts derived
from it (geometry), reading a Hugging Face config.json into a spec (hf_config), the bundled
library of open models and the presets (library, presets), and fetching a config from the Hub (hub).
"""
