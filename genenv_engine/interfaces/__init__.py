"""What users and other tools call: the command line, the benchmarks behind `genenv bench`, the generated references and
figures, interop (tasks in and out), loggers, model export, and the tools for environment authors (`genenv env check`
and `genenv env new`).
"""
