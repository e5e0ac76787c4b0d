"""Optimizer construction: the optimizer a RunConfig names, with its clipping and loss scaling.

Keras 3 semantics: ``clipnorm`` clips each gradient tensor by its own norm,
``global_clipnorm`` clips all of them together by their global norm, ``clipvalue``
clips each element. Under ``mixed_float16`` the optimizer is wrapped in a
``LossScaleOptimizer`` (``scale_loss`` + ``apply_gradients``, which unscales and
skips non-finite steps; Keras 2's ``get_scaled_loss`` is gone).

``weight_decay`` is decoupled (AdamW: ``w -= lr * wd * w`` beside the Adam update) for
``adamw`` only; for the other optimizers it is an L2 penalty added to the loss in
``tfwb.tf.runner.train_step`` (``l2_penalty``), whose gradient then goes through the optimizer's
own scaling. For SGD the two are the same; for Adam they differ (the AdamW paper's point).
"""
from __future__ import annotations

import keras

from tfwb.config import RunConfig

CLIP_ARGUMENT = {"norm": "clipnorm", "global_norm": "global_clipnorm", "value": "clipvalue"}


def make_optimizer(cfg: RunConfig) -> keras.optimizers.Optimizer:
    """The optimizer ``cfg`` names, with its clipping, wrapped for loss scaling under float16.

    Example:
        >>> make_optimizer(RunConfig(optimizer="sgd", clip="global_norm:1.0"))  # doctest: +SKIP
    """
    kw = {}
    if cfg.clip_spec:
        kind, value = cfg.clip_spec
        kw[CLIP_ARGUMENT[kind]] = value
    lr = cfg.learning_rate
    opt = {
        "sgd": lambda: keras.optimizers.SGD(lr, **kw),
        "momentum": lambda: keras.optimizers.SGD(lr, momentum=0.9, **kw),
        "adam": lambda: keras.optimizers.Adam(lr, **kw),
        "adamw": lambda: keras.optimizers.AdamW(
            lr, **kw, **({} if cfg.weight_decay is None else {"weight_decay": cfg.weight_decay})),
        "rmsprop": lambda: keras.optimizers.RMSprop(lr, **kw),
        "nadam": lambda: keras.optimizers.Nadam(lr, **kw),
    }[cfg.optimizer]()
    if cfg.mixed_precision == "mixed_float16":
        opt = keras.mixed_precision.LossScaleOptimizer(opt)
    return opt
