"""The Android agent: units reached over ADB (USB or TCP) through adb-shell.

Modules in the order a job uses them: `keys` and `transport` (the typed ADB connection),
`inventory` (getprop -> profile), `device_paths` and `push_cache` (what lives where on the
unit), `test_data`, `perf_test` and `farm_runner` (the two runners), `jobs` (run one in the
background and collect it), `thermal` (dumpsys/sysfs -> `Thermal`), and `agent`. A generation
job: `generate_stage` (the folder and the generation runner pushed), `generate_job` (run on the
unit), `generate_result` (its result.json read).
"""
