"""Gives a linux_x86_64 wheel its manylinux tag: python scripts/wheel_platform_tag.py WHEEL OUT_DIR.

Checks every ELF file in the wheel the way a manylinux policy does (auditwheel's job, with nothing
to install): it may need only glibc's libraries (and the wheel's own libflashcore.so), no
libstdc++, libcudart or other system library; the newest GLIBC_x.y symbol version it references
sets the tag manylinux_2_y_x86_64. Writes the retagged wheel to OUT_DIR and prints its path; exits 1,
saying why, when a file needs a library outside that set.
"""

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

# What a manylinux platform guarantees (PEP 600 / auditwheel's policy), plus the wheel's own library.
ALLOWED_LIBRARIES = {"libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0",
                     "ld-linux-x86-64.so.2", "libgcc_s.so.1", "libflashcore.so"}


def elf_needs(path):
    """(NEEDED libraries, referenced GLIBC versions as (2, y), other version references)."""
    dump = subprocess.run(["objdump", "-p", path], check=True, capture_output=True, text=True).stdout
    needed = set(re.findall(r"^\s*NEEDED\s+(\S+)", dump, re.M))
    versions = re.findall(r"\b(GLIBC|GLIBCXX|CXXABI|GCC)_([0-9.]+)\b", dump)
    glibc = {tuple(int(p) for p in v.split(".")[:2]) for name, v in versions if name == "GLIBC"}
    others = {f"{name}_{v}" for name, v in versions if name != "GLIBC"}
    return needed, glibc, others


def main(wheel_path, out_dir):
    name = os.path.basename(wheel_path)
    if shutil.which("objdump") is None:  # no binutils: keep the linux tag, which pip installs here
        sys.stderr.write("wheel_platform_tag: no objdump (binutils): the wheel keeps its linux_x86_64 tag\n")
        print(shutil.copy(wheel_path, out_dir))
        return
    if not name.endswith("-linux_x86_64.whl"):
        sys.exit(f"wheel_platform_tag: {name}: expected a *-linux_x86_64.whl")
    newest = (2, 17)  # manylinux2014, the oldest tag pip still meets often
    problems = []
    with zipfile.ZipFile(wheel_path) as wheel, tempfile.TemporaryDirectory() as scratch:
        for info in wheel.infolist():
            with wheel.open(info) as f:
                if f.read(4) != b"\x7fELF":
                    continue
            path = wheel.extract(info, scratch)
            needed, glibc, others = elf_needs(path)
            outside = sorted(needed - ALLOWED_LIBRARIES)
            if outside:
                problems.append(f"{info.filename} needs {', '.join(outside)}")
            if others - {"GCC_3.0", "GCC_3.3", "GCC_4.2.0"}:
                problems.append(f"{info.filename} references {', '.join(sorted(others))} (libstdc++ not linked in?)")
            newest = max([newest, *glibc])
    if problems:
        sys.exit("wheel_platform_tag: not a manylinux wheel:\n  " + "\n  ".join(problems))
    tag = f"manylinux_{newest[0]}_{newest[1]}_x86_64"
    out_path = os.path.join(out_dir, name[: -len("linux_x86_64.whl")] + tag + ".whl")

    def record_line(filename, data):
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        return f"{filename},sha256={digest},{len(data)}"

    with zipfile.ZipFile(wheel_path) as src, zipfile.ZipFile(out_path, "w", zipfile.ZIP_DEFLATED) as dst:
        items = src.infolist()
        wheel_file = next(i.filename for i in items if i.filename.endswith(".dist-info/WHEEL"))
        record_file = next(i.filename for i in items if i.filename.endswith(".dist-info/RECORD"))
        wheel_text = src.read(wheel_file).decode().replace("-linux_x86_64", f"-{tag}")
        records = [line for line in src.read(record_file).decode().splitlines()
                   if line and not line.startswith(wheel_file + ",")]
        records.insert(len(records) - 1, record_line(wheel_file, wheel_text.encode()))
        for info in items:  # same order, names and modes (the CLI stays executable)
            if info.filename == wheel_file:
                data = wheel_text.encode()
            elif info.filename == record_file:
                data = ("\n".join(records) + "\n").encode()
            else:
                data = src.read(info)
            dst.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    print(out_path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
