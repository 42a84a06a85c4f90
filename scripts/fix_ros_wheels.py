"""The ROS 2 wheels' exported CMake files name their build machine's Python and NumPy include
folders; point them at this interpreter's (idempotent), so that colcon can build the interfaces."""

import pathlib
import sys
import sysconfig

import numpy

BUILD_MACHINE = {
    "/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include": numpy.get_include(),
    "/opt/python/cp311-cp311/include/python3.11": sysconfig.get_path("include"),
}

patched = 0
for path in (pathlib.Path(sys.prefix) / "share").rglob("*.cmake"):
    text = path.read_text(errors="ignore")
    new = text
    for old, here in BUILD_MACHINE.items():
        new = new.replace(old, here)
    if new != text:
        path.write_text(new)
        patched += 1
print(f"fix_ros_wheels: patched {patched} CMake files")
