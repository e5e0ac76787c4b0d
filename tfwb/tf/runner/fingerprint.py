"""A run's fingerprint: versions, devices and machine (its CPU's flags too), and the full config it ran."""
from __future__ import annotations

import platform

import keras
import tensorflow as tf

from tfwb import hardware
from tfwb.config import RunConfig


def fingerprint(cfg: RunConfig, strategy=None) -> dict:
    """Versions, devices and machine a run used (JSON-ready)."""
    gpus = []
    for d in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(d)
        cc = details.get("compute_capability")
        gpus.append({"name": details.get("device_name", d.name),
                     "compute_capability": list(cc) if cc else None})
    hw = hardware.detect()
    return {
        "tensorflow": tf.__version__, "keras": keras.__version__,
        "python": platform.python_version(), "platform": platform.platform(),
        **hardware.fingerprint_cpu(hw),         # model, cores, microarchitecture, the flags the rules read
        "environment": hw.environment, "gpus": gpus,
        "logical_devices": [d.name for d in tf.config.list_logical_devices()],
        "replicas": strategy.num_replicas_in_sync if strategy is not None else None,
        "size": cfg.resolved_size,              # "auto" resolved: small under TFWB_FAST=1
        "config": cfg.to_dict(),
    }
