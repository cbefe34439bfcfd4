"""The paths whose contents the device evidence describes: a commit that
changes any of them after the measured one makes docs/device-evidence.json
stale (collect.py refuses to measure with uncommitted changes in them;
render.py --status compares)."""

DEVICE_CODE = ["components", "main", "CMakeLists.txt", "partitions.csv", "partitions-8mb.csv",
               "sdkconfig.defaults", "sdkconfig.defaults.esp32s3", "sdkconfig.defaults.esp32",
               "sdkconfig.defaults.pte", "sdkconfig.defaults.pte.esp32"]
