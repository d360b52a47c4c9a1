"""The output-path rule of hetrain's Python tools (docs/architecture.md, "Invariants"), as
include/hetrain/output_paths.hpp has it for the C++ tools.

Before any work, an output is refused, with one line, when it is the same file as an input (device and
inode after symbolic links; a name not written yet: its folder's real path plus its own name), when it
exists and is not a regular file (a folder, a character or block device, a FIFO, a socket: the tools write
OUTPUT.tmp-PID and rename it over OUTPUT, which would replace a device node with a file), or when its
folder does not exist, is not a folder or cannot be written.
"""
import os
import stat


def _identity(path):
    try:
        st = os.stat(path)
        return ("file", st.st_dev, st.st_ino), st.st_mode
    except OSError:
        folder, base = os.path.split(path)
        return ("name", os.path.join(os.path.realpath(folder or "."), base)), None


def _kind(mode):
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def _folder_problem(path):
    folder = os.path.dirname(path) or "."
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        return "the folder %s does not exist" % folder
    except OSError as e:
        return "the folder %s: %s" % (folder, e.strerror or e)
    if not stat.S_ISDIR(st.st_mode):
        return "%s is not a folder" % folder
    if not os.access(folder, os.W_OK | os.X_OK):
        return "the folder %s is not writable" % folder
    return None


def output_paths_problem(outputs, inputs):
    """outputs, inputs: lists of (option, path); a path of None or "" is skipped. Returns the first problem
    as one line ("-o c.h5 is the same file as the input c.h5 (checkpoint): refusing to overwrite an input;
    choose another output"), or None."""
    ins = [(o, p, _identity(p)[0]) for o, p in inputs if p]
    seen = []
    for option, path in outputs:
        if not path:
            continue
        name = "%s %s" % (option, path)
        ident, mode = _identity(path)
        for in_option, in_path, in_ident in ins:
            if ident == in_ident:
                return ("%s is the same file as the input %s (%s): refusing to overwrite an input; "
                        "choose another output" % (name, in_path, in_option))
        if mode is not None and not stat.S_ISREG(mode):
            return "%s: not a regular file (%s): refusing to write over it; choose another output" % (
                name, _kind(mode))
        folder = _folder_problem(path)
        if folder:
            return "%s: cannot write there: %s" % (name, folder)
        for other_name, other_ident in seen:
            if ident == other_ident:
                return "%s is the same file as %s: one output would overwrite the other; choose different outputs" % (
                    name, other_name)
        seen.append((name, ident))
    return None


def replace_output(tmp, output):
    """Renames the finished tmp over output, unless output has become something other than a regular file
    meanwhile (then tmp is removed and OSError raised): a device node is never replaced by a file."""
    try:
        mode = os.stat(output).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        os.remove(tmp)
        raise OSError(0, "not a regular file (%s)" % _kind(mode))
    os.replace(tmp, output)
