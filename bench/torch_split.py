"""torch_split.py — which of PyTorch's profiled ops are products: bench/torch_bench.py --split
divides a training step into its products and the rest with it, the counterpart of `sfvit
bench --no-products` (which skips sfvit's product kernels and runs everything else).

No torch import here, so tests/test_bench_compare.sh checks the rule without PyTorch.
"""

# Ops whose self time is a matrix product.
PRODUCT_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::mv",
               "aten::addmv", "aten::dot"}
# Convolutions run their products inside the op: all of a dense one's time counts as products,
# which gives PyTorch the lower rest (sfvit's im2col stays in its step without products). A
# depthwise one is no product on either side, unless PyTorch runs it as im2col and a product
# (_slow_conv2d: autocast where oneDNN has no bf16 kernels for it).
CONV_OPS = {"aten::mkldnn_convolution", "aten::mkldnn_convolution_backward", "aten::convolution_backward",
            "aten::thnn_conv2d", "aten::_convolution", "aten::convolution", "aten::conv2d"}
IM2COL_CONV_OPS = {"aten::_slow_conv2d_forward", "aten::_slow_conv2d_backward"}


def is_depthwise(input_shapes):
    """A convolution's inputs hold a weight [C, 1, kh, kw] with C > 1."""
    return any(isinstance(s, list) and len(s) == 4 and s[1] == 1 and s[0] > 1 for s in input_shapes)


def split(events):
    """events: (op name, input shapes, self ms). Returns (products ms, [(op, ms)] of the rest,
    largest first; a depthwise convolution's name gains " (depthwise)")."""
    products, rest = 0.0, {}
    for name, shapes, ms in events:
        if name in PRODUCT_OPS or name in IM2COL_CONV_OPS:
            products += ms
            continue
        if name in CONV_OPS:
            if not is_depthwise(shapes):
                products += ms
                continue
            name += " (depthwise)"
        rest[name] = rest.get(name, 0.0) + ms
    return products, sorted(rest.items(), key=lambda r: -r[1])
