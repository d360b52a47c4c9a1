#!/usr/bin/env -S /usr/bin/python3
"""Convert a hetrain checkpoint into a PyTorch state_dict.

    data_tools/hetrain_to_torch.py ckpt/checkpoint-00000100.h5 -o model.pt
    data_tools/hetrain_to_torch.py ckpt/checkpoint-00000100.h5 --print

The checkpoint (docs/checkpoint-format.md) is checked first: its `format` and `version`, its CRC-32 over
every tensor, and that its tensors are exactly those of the model it names, with the same shapes and
types. A file that fails a check is refused with one line naming it and the problem, and exit status 1;
so is an output that cannot be written, and an attribute that does not fit the tensors or hetrain's limits
(before a model of that size is built). Attributes are quoted in at most QUOTE_LIMIT characters.

The output, written with torch.save, is an OrderedDict of tensors in the order of the torch module's
state_dict(): every /parameters/* and /buffers/* dataset, float32 (num_batches_tracked: a 0-d int64
tensor). It loads with strict=True into hetrain_models.build(model, input_shape, num_classes) and, for
resnet18 / resnet50 with 3 input channels, into torchvision.models.resnet18/50(num_classes=K). The
checkpoint's model, input shape and class count travel with it as the attribute `hetrain` of the
OrderedDict (load_state_dict ignores it; hetrain_models.load uses it). The optimizer's momentum buffers
are not written (--model-only, the default).

A checkpoint of a run with --ema-decay also holds the moving average of the weights (/ema/parameters,
/ema/buffers): that is what is exported, as YOLOv5 exports its EMA, unless --no-ema asks for the trained
weights themselves.
"""

import argparse
import io
import os
import signal
import sys
import zlib
from collections import OrderedDict

import numpy as np

FORMAT = "hetrain-checkpoint"
VERSION = 1
GROUPS = ("parameters", "buffers", "optimizer/momentum_buffer", "ema/parameters", "ema/buffers")


# A checkpoint's attributes can be anything (a crafted file, another program's): an error message quotes at
# most this many characters of one.
QUOTE_LIMIT = 200
# hetrain's limits (include/hetrain/data.hpp kMaxSampleBytes, int32 labels): a checkpoint hetrain wrote
# never exceeds them, and a model built for more could take all the memory before failing.
MAX_SAMPLE_VALUES = 1 << 28
MAX_CLASSES = (1 << 31) - 1


class CheckpointError(Exception):
    """A checkpoint that cannot be used; the message names the file and the problem."""


def _clip(text, limit=QUOTE_LIMIT):
    """`text` cut to `limit` characters, saying how long it was."""
    text = str(text)
    return text if len(text) <= limit else "%s... (%d characters)" % (text[:limit], len(text))


def _quote(value):
    """An attribute's value for an error message: repr(), at most QUOTE_LIMIT characters."""
    if isinstance(value, (bytes, str)) and len(value) > QUOTE_LIMIT:
        return "%r... (%d %s)" % (value[:QUOTE_LIMIT], len(value), "bytes" if isinstance(value, bytes) else "characters")
    if isinstance(value, np.ndarray) and value.size > 16:
        return "%s array of shape %s" % (value.dtype, list(value.shape))
    return _clip(repr(value.tolist() if isinstance(value, np.ndarray) else value))


def _text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray) and value.shape == ():
        return _text(value[()])
    return value if isinstance(value, str) else None


def _attr(f, path, name, required=True):
    if name not in f.attrs:
        if required:
            raise CheckpointError("%s: missing root attribute '%s'" % (path, name))
        return None
    return f.attrs[name]


def _int_attr(f, path, name):
    v = np.asarray(_attr(f, path, name))
    if v.shape != () or v.dtype.kind not in "iu":
        raise CheckpointError("%s: root attribute '%s' must be an integer scalar, got %s %s" %
                              (path, name, v.dtype, _clip(list(v.shape))))
    return int(v)


def _little_endian(a):
    """The array's values with little-endian byte order (the checksum is over little-endian bytes)."""
    return a.astype(a.dtype.newbyteorder("<"), copy=False) if a.dtype.byteorder == ">" else a


def _check_against_tensors(path, meta, tensors):
    """The classes and input size the attributes claim, against the tensors of the first and last layers,
    before a model of that size is built (a crafted attribute must not make it allocate gigabytes)."""
    c, h, w = meta["input_shape"]
    name = meta["model"]
    head = "fc3.weight" if name in ("mlp", "lenet") else "fc.weight"
    first, want = ("fc1.weight", c * h * w) if name == "mlp" else ("conv1.weight", c)
    for key, dim, value, what in ((head, 0, meta["num_classes"], "num_classes"), (first, 1, want, "input_shape")):
        t = tensors.get(("parameters", key))
        if t is not None and (t.ndim <= dim or t.shape[dim] != value):
            raise CheckpointError("%s: root attribute %s (%s) does not fit /parameters/%s of shape %s" % (
                path, what, meta["num_classes"] if what == "num_classes" else meta["input_shape"], key, list(t.shape)))


def _check_detector_against_tensors(path, meta, tensors, model_file):
    """A YOLOv5 YAML model's Detect outputs na·(5 + nc) per level: num_classes must fit its first conv's bias
    before a model of that size is built."""
    import yaml
    try:
        with open(model_file) as f:
            cfg = yaml.safe_load(f)
        layers = cfg["backbone"] + cfg["head"]
        detect = len(layers) - 1
        na = len(cfg["anchors"][0]) // 2
    except (OSError, yaml.YAMLError, KeyError, TypeError, IndexError) as e:
        raise CheckpointError("%s: the model file %s does not read as a YOLOv5 YAML model (%s)" % (
            path, model_file, _clip(str(e).splitlines()[0] if str(e) else type(e).__name__)))
    bias = tensors.get(("parameters", "model.%d.m.0.bias" % detect))
    if bias is None or bias.shape != (na * (5 + meta["num_classes"]),):
        raise CheckpointError("%s: root attribute num_classes (%d) does not fit /parameters/model.%d.m.0.bias "
                              "of %s" % (path, meta["num_classes"], detect,
                                         "shape %s" % list(bias.shape) if bias is not None else "the file (absent)"))


def read_checkpoint(path, use_ema=True, model_file=None):
    """(meta, state_dict) of a verified hetrain checkpoint; raises CheckpointError. With use_ema, a checkpoint
    that holds a moving average of the weights gives the average (meta["ema"] says which was taken).
    `model_file`: a YAML model's file, when the path the checkpoint names does not lead to it."""
    import h5py
    import torch
    if not os.path.isfile(path):
        raise CheckpointError("%s: no such file" % path)
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise CheckpointError("%s: not an HDF5 file that opens (%s)" % (path, str(e).splitlines()[0]))
    with f:
        fmt = _text(_attr(f, path, "format"))
        if fmt != FORMAT:
            raise CheckpointError("%s: format is %s, expected %r" % (path, _quote(fmt), FORMAT))
        version = _int_attr(f, path, "version")
        if version != VERSION:
            raise CheckpointError("%s: checkpoint version %d is not supported (this tool reads version %d)" %
                                  (path, version, VERSION))
        model = _text(_attr(f, path, "model"))
        if model is None:
            raise CheckpointError("%s: root attribute 'model' must be a string, got %s" %
                                  (path, _quote(_attr(f, path, "model"))))
        shape = np.asarray(_attr(f, path, "input_shape"))
        if shape.shape != (3,) or shape.dtype.kind not in "iu":
            raise CheckpointError("%s: input_shape must be 3 integers [C, H, W], got %s" % (path, _quote(shape)))
        meta = {"model": model, "input_shape": [int(v) for v in shape],
                "num_classes": _int_attr(f, path, "num_classes"),
                "global_step": _int_attr(f, path, "global_step")}
        c, h, w = meta["input_shape"]
        if min(c, h, w) < 1 or c * h * w > MAX_SAMPLE_VALUES:
            raise CheckpointError("%s: input_shape %s is not a sample hetrain trains on (positive sizes, C*H*W at "
                                  "most %d)" % (path, meta["input_shape"], MAX_SAMPLE_VALUES))
        if not 1 <= meta["num_classes"] <= MAX_CLASSES:
            raise CheckpointError("%s: num_classes %d is not between 1 and %d" % (path, meta["num_classes"], MAX_CLASSES))
        expected = np.asarray(_attr(f, path, "checksum_crc32"))
        if expected.shape != () or expected.dtype.kind not in "iu":
            raise CheckpointError("%s: checksum_crc32 must be an unsigned 32-bit scalar" % path)

        # Every tensor dataset, in the checksum's order; all are read (the checksum covers the momentum).
        tensors = {}
        crc = 0
        for group in GROUPS:
            g = f.get(group)
            if g is None:  # e.g. /buffers of a model without batch norm; missing tensors are named below
                continue
            if not isinstance(g, h5py.Group):
                raise CheckpointError("%s: /%s is not a group" % (path, group))
            for name in sorted(g.keys(), key=lambda s: s.encode("utf-8")):
                d = g[name]
                if not isinstance(d, h5py.Dataset):
                    raise CheckpointError("%s: /%s/%s is not a dataset" % (path, group, name))
                a = _little_endian(np.asarray(d[()]))
                crc = zlib.crc32(a.tobytes(), crc)
                tensors[(group, name)] = a
        if crc != int(expected):
            raise CheckpointError("%s: checksum mismatch: the tensors' CRC-32 is 0x%08x, the file records 0x%08x "
                                  "(the file is corrupt or was changed after writing)" % (path, crc, int(expected)))

    # The state_dict, in the order of the torch module's, with the model's shapes and types.
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import hetrain_models
    yaml_model = hetrain_models.is_yaml(meta["model"])
    if not yaml_model and meta["model"] not in hetrain_models.MODELS:
        raise CheckpointError("%s: unknown model %s (known: %s, or a YOLOv5 .yaml file)" % (
            path, _quote(meta["model"]), ", ".join(hetrain_models.MODELS)))
    if yaml_model:
        try:
            model_file = model_file or hetrain_models.find_model_file(meta["model"], near=path)
        except ValueError as e:
            raise CheckpointError("%s: %s" % (path, e))
        _check_detector_against_tensors(path, meta, tensors, model_file)
    else:
        _check_against_tensors(path, meta, tensors)
    try:
        module = hetrain_models.build(meta["model"], meta["input_shape"], meta["num_classes"], model_file)
    except (ValueError, RuntimeError, MemoryError, OverflowError) as e:
        raise CheckpointError("%s: cannot build %s for input %s and %d classes: %s" % (
            path, meta["model"], "x".join(map(str, meta["input_shape"])), meta["num_classes"],
            _clip(str(e).splitlines()[0] if str(e) else type(e).__name__)))
    reference = module.state_dict()
    names = {(group, name) for group, name in tensors if group in ("parameters", "buffers")}
    params = {n for n, _ in module.named_parameters()}
    # A detector's anchors are YOLOv5's buffer, not hetrain's: they come from the model file, in stride units.
    generated = {n for n in reference if yaml_model and n.endswith(".anchors")}
    want = {("parameters" if n in params else "buffers", n) for n in reference if n not in generated}
    if names != want:
        missing = sorted("/%s/%s" % k for k in want - names)
        extra = sorted("/%s/%s" % k for k in names - want)
        problems = []
        for what, items in (("missing", missing), ("unexpected", extra)):
            if items:
                problems.append("%s %s%s" % (what, ", ".join(items[:3]), " and %d more" % (len(items) - 3)
                                             if len(items) > 3 else ""))
        raise CheckpointError("%s: tensors do not match %s for input %s and %d classes: %s" % (
            path, meta["model"], "x".join(map(str, meta["input_shape"])), meta["num_classes"], "; ".join(problems)))
    momentum = {name for group, name in tensors if group == "optimizer/momentum_buffer"}
    if momentum != params:
        raise CheckpointError("%s: /optimizer/momentum_buffer does not hold one dataset per parameter" % path)
    # The moving average holds every parameter and every float buffer (not num_batches_tracked).
    has_ema = any(group.startswith("ema/") for group, _ in tensors)
    if has_ema:
        averaged = {(group[4:], name) for group, name in tensors if group.startswith("ema/")}
        if averaged != {k for k in want if not k[1].endswith("num_batches_tracked")}:
            raise CheckpointError("%s: /ema does not hold one dataset per parameter and running statistic" % path)
    meta["ema"] = has_ema and use_ema
    state_dict = OrderedDict()
    for key, ref in reference.items():
        if key in generated:
            state_dict[key] = ref.clone()
            continue
        group = "parameters" if key in params else "buffers"
        source = "ema/" + group if meta["ema"] and not key.endswith("num_batches_tracked") else group
        checked = (group,) if group == "buffers" else (group, "optimizer/momentum_buffer")
        if has_ema and not key.endswith("num_batches_tracked"):
            checked += ("ema/" + group,)
        for g in checked:
            a = tensors[(g, key)]
            want_dtype = np.int64 if ref.dtype == torch.int64 else np.float32
            if a.dtype != want_dtype or tuple(a.shape) != tuple(ref.shape):
                raise CheckpointError("%s: /%s/%s is %s %s, %s expects %s %s" % (
                    path, g, key, a.dtype, list(a.shape), meta["model"], np.dtype(want_dtype), list(ref.shape)))
        state_dict[key] = torch.from_numpy(tensors[(source, key)].copy())  # a 0-d array stays 0-d
    state_dict._metadata = getattr(reference, "_metadata", None)  # module versions, as state_dict() gives
    if state_dict._metadata is None:
        del state_dict._metadata
    state_dict.hetrain = {"model": meta["model"], "input_shape": meta["input_shape"],
                          "num_classes": meta["num_classes"], "global_step": meta["global_step"],
                          "moving_average": meta["ema"]}
    return meta, state_dict


def _output_paths():
    """data_tools/hetrain_output_paths.py, beside this file (installed together)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import hetrain_output_paths
    return hetrain_output_paths


def _fail(message):
    print("hetrain_to_torch: error: %s" % message, file=sys.stderr)
    return 1


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="hetrain_to_torch.py",
        description="Convert a hetrain checkpoint (HDF5) into a PyTorch state_dict (torch.save).")
    p.add_argument("checkpoint", help="checkpoint-SSSSSSSS.h5 written by hetrain train --checkpoint-dir")
    p.add_argument("-o", "--output", help="the .pt file to write")
    p.add_argument("--model-only", action="store_true", default=True,
                   help="write the model's parameters and buffers only, no optimizer state (the default)")
    p.add_argument("--model-file", help="a YOLOv5 YAML model's file, when the path the checkpoint names "
                   "(its `model` attribute) does not lead to it")
    p.add_argument("--no-ema", dest="use_ema", action="store_false",
                   help="export the trained weights even when the checkpoint holds their moving average "
                        "(--ema-decay), which is exported by default")
    p.add_argument("--print", dest="print_keys", action="store_true",
                   help="list the state_dict's keys, types and shapes")
    args = p.parse_args(argv)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # --print | head
    if not args.output and not args.print_keys:
        p.error("nothing to do: give -o MODEL.pt and/or --print")
    tmp = None
    if args.output:  # an output that cannot be written fails at once, before the conversion
        problem = _output_paths().output_paths_problem(
            [("-o", args.output)], [("checkpoint", args.checkpoint), ("--model-file", args.model_file)])
        if problem:
            return _fail(problem)
        tmp = args.output + ".tmp-%d" % os.getpid()
        try:
            out = open(tmp, "wb")
        except OSError as e:
            return _fail("%s: cannot write (%s)" % (args.output, e.strerror or e))
    try:
        meta, state_dict = read_checkpoint(args.checkpoint, args.use_ema, args.model_file)
    except Exception as e:  # noqa: BLE001 -- every bad input is one line, never a traceback
        if tmp:
            out.close()
            os.remove(tmp)
        if isinstance(e, CheckpointError):
            return _fail(str(e))
        return _fail("%s: cannot read the checkpoint: %s: %s" % (args.checkpoint, type(e).__name__,
                                                                 _clip(str(e).splitlines()[0] if str(e) else "")))
    if args.print_keys:
        print("%s: %s, input %s, %d classes, step %d%s" % (
            args.checkpoint, meta["model"], "x".join(map(str, meta["input_shape"])), meta["num_classes"],
            meta["global_step"], ", moving average of the weights" if meta["ema"] else ""))
        for k, t in state_dict.items():
            print("  %-40s %-8s %s" % (k, str(t.dtype).replace("torch.", ""), list(t.shape)))
    if args.output:
        import torch
        try:
            # Serialised in memory, written with plain I/O: on a full disk torch.save's own writer aborts the
            # process with a C++ stack, a plain write raises OSError (one line).
            image = io.BytesIO()
            torch.save(state_dict, image)
            with out:
                out.write(image.getbuffer())
                out.flush()
                os.fsync(out.fileno())
            _output_paths().replace_output(tmp, args.output)  # never over a device node
        except (OSError, RuntimeError) as e:
            if os.path.exists(tmp):
                os.remove(tmp)
            why = e.strerror if isinstance(e, OSError) and e.strerror else _clip(str(e).splitlines()[0])
            return _fail("%s: cannot write (%s)" % (args.output, why))
        n = sum(t.numel() for t in state_dict.values())
        print("%s: %d tensors (%d values) of %s written to %s" % (
            args.checkpoint, len(state_dict), n, meta["model"], args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
