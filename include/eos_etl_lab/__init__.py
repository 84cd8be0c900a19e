"""The lab: what proves and measures the product, kept beside it. Fault injection and soaks
(:mod:`.faults`) and benchmarks (:mod:`.bench`), with a command line of their own
(``python -m eos_etl_lab soak|bench``). It imports the product; the product never imports it
(``tests/unit/test_code_structure.py`` holds both to that)."""
