"""Models from elsewhere, re-typed and credited, that the book registers as workloads (chapter 08).

They are not built-in workloads: each module has a ``register()`` that calls
``tfwb.register_workload`` (what a reader does with their own model), so
``python -m tfwb run --workload tfwb.tf.examples.mnist_convnet:register`` runs one.
"""
