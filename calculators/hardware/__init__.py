"""GPUs: the sourced catalogue of accelerators (catalogue) and the CSV reading it shares with
the price sheet (csv_rows).
"""
