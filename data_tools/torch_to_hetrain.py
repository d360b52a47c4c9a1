#!/usr/bin/env -S /usr/bin/python3
"""Convert a PyTorch state_dict into a hetrain weights file, for hetrain train --init-from.

    data_tools/torch_to_hetrain.py yolov5s_state.pt -o yolov5s.h5
    hetrain train --model models/yolov5s.yaml --init-from yolov5s.h5 --data my-train.h5 ...

The input is a file torch.load reads with weights_only=True (tensors and plain containers only: a crafted .pt
cannot run code while it is read) holding either
  * a state_dict: a mapping of names to tensors, e.g. one written by data_tools/hetrain_to_torch.py, or
  * a dict with a module under 'ema' or 'model', as YOLOv5's checkpoints (yolov5s.pt) are: the 'ema'
    module when present, else 'model', as YOLOv5 itself loads them. Those hold pickled modules, which only
    the full unpickler reads, and it runs whatever code the file names: give --trust-file only for a file
    you trust, with YOLOv5's code on PYTHONPATH (its classes are pickled with them; without it the error says
    so). Better, save the state_dict once where YOLOv5 is installed and convert that without --trust-file:
    torch.save(ckpt['model'].float().state_dict(), 'yolov5s_state.pt').
Floating-point tensors of any precision (bfloat16 and float16 included) are written as float32; a tensor
holding NaN or Inf is refused with one line naming it, and nothing is written.

The output (docs/checkpoint-format.md, "Starting from other weights") is an HDF5 file: root attributes
format "hetrain-weights", version 1, source (the input's path), checksum_crc32 (zlib's CRC-32 over the
tensors, group by group, names in byte order); /parameters/NAME and /buffers/NAME as float32 (the batch-norm
running_mean/running_var and num_batches_tracked, int64, are buffers; every other float tensor is a
parameter). YOLOv5's Detect anchors are left out: hetrain takes them from the model file. hetrain matches the
tensors to its model by name and shape; the model's others keep their initialisation (a detector trained
for another class count: its Detect convs).
A bad input or an output that cannot be written is refused with one line naming it, exit status 1, and no
file left at the output's name.
"""

import argparse
import io
import os
import sys
import zlib

import numpy as np

FORMAT = "hetrain-weights"
VERSION = 1
BUFFER_SUFFIXES = (".running_mean", ".running_var", ".num_batches_tracked")
SKIPPED_SUFFIXES = (".anchors", ".anchor_grid")  # YOLOv5's Detect buffers: hetrain reads anchors from the YAML


class ConvertError(Exception):
    """An input that cannot be converted; the message names the file and the problem."""


def _first_line(e):
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def state_dict_of(path, trusted=False):
    """The tensors of a torch.load-able file: a state_dict, or YOLOv5's checkpoint dict ('ema' or 'model').
    Read with weights_only=True unless `trusted` (the full unpickler runs the code a file names)."""
    import pickle
    import torch
    if not os.path.isfile(path):
        raise ConvertError("%s: no such file" % path)
    try:
        obj = torch.load(path, map_location="cpu", weights_only=not trusted)
    except ModuleNotFoundError as e:
        raise ConvertError("%s: unpickling it needs the module '%s' (a YOLOv5 checkpoint needs YOLOv5's code on "
                           "PYTHONPATH, or save its state_dict where YOLOv5 is installed)" % (path, e.name))
    except pickle.UnpicklingError as e:
        if trusted:
            raise ConvertError("%s: torch.load cannot read it (%s)" % (path, _first_line(e)))
        raise ConvertError("%s: holds more than tensors, which only the full unpickler reads, and it runs any code "
                           "the file names (%s); convert a state_dict instead, or give --trust-file if you trust "
                           "the file" % (path, _first_line(e)))
    except Exception as e:  # noqa: BLE001 -- every unreadable input is one line
        raise ConvertError("%s: torch.load cannot read it (%s)" % (path, str(e).splitlines()[0] if str(e) else type(e).__name__))
    if isinstance(obj, dict):
        for key in ("ema", "model"):
            module = obj.get(key)
            if module is not None and hasattr(module, "state_dict"):
                return module.float().state_dict(), key
    if not isinstance(obj, dict) or not obj or not all(hasattr(v, "numpy") for v in obj.values()):
        raise ConvertError("%s: neither a state_dict (names to tensors) nor a checkpoint with an 'ema' or 'model' "
                           "module" % path)
    return obj, None


def write_weights(state_dict, source, output):
    """Writes the weights file atomically (OUTPUT.tmp-PID, renamed when complete)."""
    import h5py
    groups = {"parameters": {}, "buffers": {}}
    for name, t in state_dict.items():
        if name.endswith(SKIPPED_SUFFIXES):
            continue
        if hasattr(t, "detach"):
            t = t.detach().cpu()
            a = (t.float() if t.is_floating_point() and t.element_size() < 4 else t).numpy()  # bfloat16: numpy lacks it
        else:
            a = np.asarray(t)
        if name.endswith(".num_batches_tracked"):
            groups["buffers"][name] = a.astype("<i8")
        elif a.dtype.kind == "f":
            bad = int(a.size - np.count_nonzero(np.isfinite(a)))
            if bad:
                raise ConvertError("%s: tensor %s holds %d NaN/Inf value%s of %d: refusing to convert non-finite "
                                   "weights" % (source, name, bad, "" if bad == 1 else "s", a.size))
            groups["buffers" if name.endswith(BUFFER_SUFFIXES) else "parameters"][name] = a.astype("<f4")
        else:
            raise ConvertError("%s: tensor %s is %s, not floating point" % (source, name, a.dtype))
    if not groups["parameters"]:
        raise ConvertError("%s: no parameter tensors to convert" % source)
    crc = 0
    for group in ("parameters", "buffers"):
        for name in sorted(groups[group], key=lambda s: s.encode("utf-8")):
            crc = zlib.crc32(np.ascontiguousarray(groups[group][name]).tobytes(), crc)
    # Built in memory, written with plain I/O: a full disk is an OSError (one line), not an HDF5 write failure
    # inside h5py, after which the interpreter crashes as it exits.
    image = io.BytesIO()
    with h5py.File(image, "w") as f:
        f.attrs["format"] = FORMAT
        f.attrs["version"] = np.int32(VERSION)
        f.attrs["source"] = source
        f.attrs["checksum_crc32"] = np.uint32(crc)
        for group, tensors in groups.items():
            g = f.create_group(group)
            for name, a in tensors.items():
                g.create_dataset(name, data=a)
    tmp = "%s.tmp-%d" % (output, os.getpid())
    try:
        with open(tmp, "wb") as out:
            out.write(image.getbuffer())
            out.flush()
            os.fsync(out.fileno())
        import hetrain_output_paths
        hetrain_output_paths.replace_output(tmp, output)  # never over a device node
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return len(groups["parameters"]), len(groups["buffers"])


def main(argv=None):
    p = argparse.ArgumentParser(prog="torch_to_hetrain.py",
                                description="Convert a PyTorch state_dict (or YOLOv5 checkpoint) into a hetrain "
                                            "weights file for hetrain train --init-from.")
    p.add_argument("state_dict", help="a .pt file: a state_dict, or a dict with an 'ema'/'model' module")
    p.add_argument("-o", "--output", required=True, help="the .h5 weights file to write")
    p.add_argument("--trust-file", action="store_true",
                   help="read the input with torch.load's full unpickler, which runs any code the file names: only "
                        "for a file you trust (YOLOv5's checkpoints with pickled modules need it); without it, "
                        "weights_only=True reads tensors and plain containers only")
    args = p.parse_args(argv)
    here = os.path.dirname(os.path.abspath(__file__))  # hetrain_output_paths.py is installed beside this file
    if here not in sys.path:
        sys.path.insert(0, here)
    import hetrain_output_paths
    problem = hetrain_output_paths.output_paths_problem([("-o", args.output)], [("state_dict", args.state_dict)])
    if problem:
        print("torch_to_hetrain: error: %s" % problem, file=sys.stderr)
        return 1
    try:
        state_dict, taken = state_dict_of(args.state_dict, args.trust_file)
        params, buffers = write_weights(state_dict, args.state_dict, args.output)
    except ConvertError as e:
        print("torch_to_hetrain: error: %s" % e, file=sys.stderr)
        return 1
    except OSError as e:
        print("torch_to_hetrain: error: %s: cannot write (%s)" % (args.output, e.strerror or e), file=sys.stderr)
        return 1
    print("%s: %d parameters and %d buffers%s written to %s" % (
        args.state_dict, params, buffers, " (its '%s' module)" % taken if taken else "", args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
