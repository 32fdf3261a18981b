"""dnnframe: systematic, distributed experiments on neural-network layer design."""

__version__ = "0.1.0"
