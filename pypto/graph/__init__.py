"""Graph mode: tracing to the Tensor IR, its passes, autodiff and the IR interpreter."""
