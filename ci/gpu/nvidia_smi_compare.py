#!/usr/bin/env python3
"""Each reading of `ddx probe gpu-health --json` against what `nvidia-smi -q -x` says about the
same GPU in the same run (ci/gpu_check.sh): ECC counts, row remapping, clock event (throttle)
reasons, PCIe generation and width, temperature and its slowdown threshold, power limits.

  nvidia_smi_compare.py GPU_JSON OUT

One record per reading in OUT/checks.jsonl (results.py). nvidia-smi's XML names moved between
driver branches (clocks_throttle_reasons -> clocks_event_reasons, ecc double_bit -> dram/sram),
so each reading is looked up under every name it has had; a reading nvidia-smi does not give
is SKIP, not PASS. Readings that move between two reads a second apart (the temperature) get a
small tolerance; the idle bit of the clock reasons is left out for the same reason.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402

# NVML's clocks event reason bits (nvml.h) and nvidia-smi's element names for them.
REASON_BITS = {
    "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8, "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40, "hw_power_brake_slowdown": 0x80,
    "display_clocks_setting": 0x100,
}


def number(text):
    """The leading number of '87 C', '700.00 W', '16x'; None for 'N/A'."""
    m = re.match(r"\s*(-?[0-9.]+)", text or "")
    return float(m.group(1)) if m else None


def find(gpu, *paths):
    for path in paths:
        node = gpu.find(path)
        if node is not None and node.text is not None and node.text.strip() not in ("", "N/A"):
            return node.text.strip()
    return None


def ecc_sum(gpu, kind, uncorrectable):
    """Sum of a kind's (volatile/aggregate) counters, uncorrectable or correctable, over every
    memory: dram_/sram_ counters on newer drivers, single_bit/double_bit totals on older ones."""
    node = gpu.find(f"ecc_errors/{kind}")
    if node is None:
        return None
    total, seen = 0.0, False
    for child in node:
        if child.tag in ("single_bit", "double_bit"):
            value, is_uncorrectable = number(find(child, "total")), child.tag == "double_bit"
        elif "correctable" in child.tag:
            value, is_uncorrectable = number(child.text), "uncorrectable" in child.tag
        else:
            continue
        if value is not None and is_uncorrectable == uncorrectable:
            total += value
            seen = True
    return total if seen else None


def readings(gpu):
    """{name: (nvidia-smi's value, ddx key, tolerance)}"""
    reasons = gpu.find("clocks_event_reasons") or gpu.find("clocks_throttle_reasons")
    mask = None
    if reasons is not None:
        mask = 0
        for child in reasons:
            name = re.sub(r"^clocks?_(event_reason|throttle_reason)_", "", child.tag)
            if name in REASON_BITS and (child.text or "").strip() == "Active":
                mask |= REASON_BITS[name]
    pending = find(gpu, "remapped_rows/remapped_row_pending")
    failure = find(gpu, "remapped_rows/remapped_row_failure")
    watts = lambda *p: None if find(gpu, *p) is None else number(find(gpu, *p)) * 1000  # noqa: E731
    return {
        "ecc uncorrected since boot": (ecc_sum(gpu, "volatile", True), "ecc_uncorrected_volatile", 0),
        "ecc uncorrected lifetime": (ecc_sum(gpu, "aggregate", True), "ecc_uncorrected_aggregate", 0),
        "ecc corrected since boot": (ecc_sum(gpu, "volatile", False), "ecc_corrected_volatile", 0),
        "remapped rows corrected": (number(find(gpu, "remapped_rows/remapped_row_corr")), "remapped_corrected", 0),
        "remapped rows uncorrected": (number(find(gpu, "remapped_rows/remapped_row_unc")), "remapped_uncorrected", 0),
        "remap pending": (None if pending is None else pending == "Yes", "remap_pending", 0),
        "remap failure": (None if failure is None else failure == "Yes", "remap_failure", 0),
        "clock event reasons (idle bit aside)": (mask, "clock_event_reasons", "mask"),
        "pcie generation": (number(find(gpu, "pci/pci_gpu_link_info/pcie_gen/current_link_gen")), "pcie_gen", 0),
        "pcie generation max": (number(find(gpu, "pci/pci_gpu_link_info/pcie_gen/max_link_gen")), "pcie_gen_max", 0),
        "pcie width": (number(find(gpu, "pci/pci_gpu_link_info/link_widths/current_link_width")), "pcie_width", 0),
        "pcie width max": (number(find(gpu, "pci/pci_gpu_link_info/link_widths/max_link_width")), "pcie_width_max", 0),
        "temperature": (number(find(gpu, "temperature/gpu_temp")), "temperature_c", 3),
        "slowdown temperature": (number(find(gpu, "temperature/gpu_temp_slow_threshold")), "slowdown_temperature_c",
                                 0),
        "power limit": (watts("gpu_power_readings/current_power_limit", "power_readings/power_limit"),
                        "power_limit_mw", 1000),
        "default power limit": (watts("gpu_power_readings/default_power_limit", "power_readings/default_power_limit"),
                                "power_default_limit_mw", 1000),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("gpu_json")
    p.add_argument("out")
    args = p.parse_args()
    with open(args.gpu_json) as f:
        ddx_gpus = json.load(f)["gpus"]
    xml = subprocess.run(["nvidia-smi", "-q", "-x"], capture_output=True, text=True, timeout=60, check=True).stdout
    smi_gpus = ET.fromstring(xml).findall("gpu")
    record = lambda name, status, detail: results.record(argparse.Namespace(  # noqa: E731
        out=args.out, name=name, status=status, detail=detail, ddx=None, reference=None, unit="", min_ratio=None))
    if len(smi_gpus) != len(ddx_gpus):
        record("gpu-health vs nvidia-smi: GPUs", "FAIL", f"ddx read {len(ddx_gpus)} GPUs, nvidia-smi lists {len(smi_gpus)}")
        return 1
    failed = 0
    for ddx, smi in zip(ddx_gpus, smi_gpus):
        for name, (theirs, key, tol) in readings(smi).items():
            label = f"gpu-health vs nvidia-smi: gpu {ddx.get('index')} {name}"
            ours = ddx.get(key)
            if theirs is None or ours is None:
                record(label, "SKIP", f"ddx {ours}, nvidia-smi {theirs}: not read by both")
                continue
            if tol == "mask":
                same = (int(ours) & ~0x1) == (int(theirs) & ~0x1)
            elif isinstance(theirs, bool):
                same = bool(ours) == theirs
            else:
                same = abs(float(ours) - float(theirs)) <= tol
            failed += 0 if same else 1
            record(label, "PASS" if same else "FAIL", f"ddx {ours}, nvidia-smi {theirs}" + (f" (within {tol})" if tol and tol != "mask" else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
