#!/usr/bin/env bash
# make install: the tree under PREFIX (and under DESTDIR/PREFIX), the installed hetrain trains from another
# folder, the Lmod module file is valid Lua that sets PATH/HETRAIN_ROOT/HETRAIN_TOOLS/HETRAIN/HETRAIN_PACK
# for the prefix,
# `hetrain --version` names the release in VERSION, and an unwritable prefix fails with one line and
# installs nothing. Installs what `make` built; it never builds.
source "$(dirname "$0")/lib.sh"
at_exit 'for m in "$TMP/ro" "$TMP/part/share"; do mountpoint -q "$m" 2>/dev/null && umount "$m"; done' 

[ -x build/bin/hetrain ] && [ -x build/bin/hetrain-pack ] || fail "build/bin/hetrain is not built: run make first"
VERSION=$(head -n 1 VERSION 2>/dev/null) || fail "no file VERSION at the repository root"
[ -n "$VERSION" ] || fail "the file VERSION is empty"
# The configuration build/bin holds: install with the same one, so build/bin/.configuration stays as it is.
case "$(cat build/bin/.configuration 2>/dev/null)" in cuda) cuda=1 ;; cpu) cuda=0 ;; *) cuda=auto ;; esac
# make install, untouched by a `make test` this may run under (its -j job server is not ours).
install_to() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory CUDA=$cuda install "$@"; }

# 1. PREFIX: the tree.
P=$TMP/prefix/hetrain
install_to PREFIX="$P" >"$TMP/install.log" 2>&1 || { cat "$TMP/install.log"; fail "make install PREFIX=$P exited non-zero"; }
for f in bin/hetrain bin/hetrain-pack; do
  [ -f "$P/$f" ] && [ -x "$P/$f" ] || fail "$f is not installed as an executable file"
done
for f in jobs/*.sbatch jobs/README.md; do
  [ -e "$f" ] || continue
  [ -f "$P/share/hetrain/jobs/$(basename "$f")" ] || fail "$f is not installed in share/hetrain/jobs"
done
n=0
for f in data_tools/*.py; do
  [ -e "$f" ] || continue
  n=$((n + 1))
  cmp -s "$f" "$P/share/hetrain/tools/$(basename "$f")" || fail "$f is not installed in share/hetrain/tools"
done
for f in models/*.yaml; do
  cmp -s "$f" "$P/share/hetrain/models/$(basename "$f")" || fail "$f is not installed in share/hetrain/models"
done
[ $n -gt 0 ] || fail "no data_tools/*.py to check"
for f in README.md docs/*.md; do
  cmp -s "$f" "$P/share/doc/hetrain/$f" || fail "$f is not installed as share/doc/hetrain/$f"
done
MOD=$P/share/modulefiles/hetrain/$VERSION.lua
[ -f "$MOD" ] || fail "no module file share/modulefiles/hetrain/$VERSION.lua"
grep -q "\"$P\"" "$MOD" || fail "the module file does not name the prefix $P"
! grep -qE 'depends_on|load\(' "$MOD" || fail "the module file loads other modules"
for v in PATH HETRAIN_ROOT HETRAIN_TOOLS HETRAIN HETRAIN_PACK; do grep -q "\"$v\"" "$MOD" || fail "the module file does not set $v"; done
[ -z "$(find "$P" -name '*.tmp' -o -name '.hetrain-install.*')" ] || fail "make install left temporary files"

# 2. The module file: valid Lua, and what it sets, run with stand-ins for Lmod's functions.
LUA=$(command -v lua5.4 lua5.3 lua5.1 lua luajit 2>/dev/null | head -n 1)
[ -n "$LUA" ] || fail "missing Lua (lua5.4) to run the module file: run make deps"
{
  cat >"$TMP/lmod.lua" <<'LUA'
local env = {}
function whatis(s) assert(type(s) == "string") end
function help(...) for _, s in ipairs({...}) do assert(type(s) == "string") end end
function setenv(k, v) env[k] = v end
function prepend_path(k, v) env[k] = env[k] and (v .. ":" .. env[k]) or v end
function append_path(k, v) env[k] = env[k] and (env[k] .. ":" .. v) or v end
function pathJoin(...) return table.concat({...}, "/") end
dofile(arg[1])
for _, k in ipairs({"PATH", "HETRAIN_ROOT", "HETRAIN_TOOLS", "HETRAIN", "HETRAIN_PACK"}) do print(k .. "=" .. tostring(env[k])) end
LUA
  "$LUA" "$TMP/lmod.lua" "$MOD" >"$TMP/lmod.out" 2>&1 || { cat "$TMP/lmod.out"; fail "the module file does not run as Lua ($LUA)"; }
  grep -qx "PATH=$P/bin" "$TMP/lmod.out" || { cat "$TMP/lmod.out"; fail "the module file does not put $P/bin on PATH"; }
  grep -qx "HETRAIN_ROOT=$P" "$TMP/lmod.out" || { cat "$TMP/lmod.out"; fail "HETRAIN_ROOT is not $P"; }
  tools=$(sed -n 's/^HETRAIN_TOOLS=//p' "$TMP/lmod.out")
  [ -f "$tools/hetrain_to_torch.py" ] || fail "HETRAIN_TOOLS ($tools) does not hold the installed tools"
  grep -qx "HETRAIN=$P/bin/hetrain" "$TMP/lmod.out" || { cat "$TMP/lmod.out"; fail "HETRAIN is not $P/bin/hetrain"; }
  grep -qx "HETRAIN_PACK=$P/bin/hetrain-pack" "$TMP/lmod.out" || { cat "$TMP/lmod.out"; fail "HETRAIN_PACK is not $P/bin/hetrain-pack"; }
  lua_note="checked with $LUA"
}

# 3. The installed binary trains from another working folder.
mkdir -p "$TMP/elsewhere"
( cd "$TMP/elsewhere" && timeout 120 "$P/bin/hetrain" train --model mlp --synthetic 64 --synthetic-shape 1,8,8 \
    --global-batch 16 --max-steps 2 --quiet --device cpu ) >"$TMP/train.log" 2>&1 \
  || { cat "$TMP/train.log"; fail "the installed hetrain did not train from $TMP/elsewhere"; }

# 4. hetrain --version: the release in VERSION, the commit, and the configuration built.
"$P/bin/hetrain" --version >"$TMP/version.log" 2>&1 || { cat "$TMP/version.log"; fail "hetrain --version exited non-zero"; }
grep -qE "^hetrain $VERSION \(git [0-9a-f]{7,}(-dirty)?\)$" "$TMP/version.log" \
  || { cat "$TMP/version.log"; fail "hetrain --version does not print 'hetrain $VERSION (git COMMIT)'"; }
grep -qE "^built: cuda=(yes|no) mpi=[^ ]+ hdf5=[^ ]+ blas=[^ ]+ onednn=[^ ]+$" "$TMP/version.log" \
  || { cat "$TMP/version.log"; fail "hetrain --version does not name the configuration built"; }
version_note="--version says $(head -n 1 "$TMP/version.log")"

# 5. DESTDIR: files under DESTDIR/PREFIX, the module file speaks of PREFIX only.
S=$TMP/stage
install_to DESTDIR="$S" PREFIX=/opt/hetrain >"$TMP/stage.log" 2>&1 || { cat "$TMP/stage.log"; fail "make install DESTDIR=$S exited non-zero"; }
[ -x "$S/opt/hetrain/bin/hetrain" ] || fail "DESTDIR: no $S/opt/hetrain/bin/hetrain"
SMOD=$S/opt/hetrain/share/modulefiles/hetrain/$VERSION.lua
grep -q '"/opt/hetrain"' "$SMOD" || fail "DESTDIR: the module file does not name PREFIX /opt/hetrain"
! grep -q "$S" "$SMOD" || fail "DESTDIR: the module file names the staging folder $S"

# 6. An unwritable prefix: one line naming it, nothing installed. A read-only tmpfs (root writes anywhere
# else); without root, a folder without write permission.
# expect_refused DIR PREFIX: make install PREFIX fails with exactly one line of ours, no install(1) errors.
expect_refused() {
  local prefix=$1
  if install_to PREFIX="$prefix" >"$TMP/refused.log" 2>&1; then cat "$TMP/refused.log"; fail "make install into unwritable $prefix succeeded"; fi
  [ "$(grep -c '^make install: cannot install into' "$TMP/refused.log")" -eq 1 ] \
    && grep -q "cannot install into $prefix:" "$TMP/refused.log" && ! grep -q '^install: ' "$TMP/refused.log" \
    || { cat "$TMP/refused.log"; fail "make install into unwritable $prefix: not one clear line naming it"; }
}
ro_note=
mkdir -p "$TMP/ro" "$TMP/part/share"
if [ "$(id -u)" -ne 0 ]; then
  chmod 555 "$TMP/ro"
  expect_refused "$TMP/ro/hetrain"
  [ -z "$(ls -A "$TMP/ro")" ] || fail "make install left files in the unwritable $TMP/ro"
  chmod 755 "$TMP/ro"
  ro_note="unwritable folder refused"
elif mount -t tmpfs -o ro,size=1m tmpfs "$TMP/ro" 2>/dev/null; then
  expect_refused "$TMP/ro/hetrain"
  umount "$TMP/ro"
  # Writable prefix, read-only share/: refused before bin/ gets anything.
  mount -t tmpfs -o ro,size=1m tmpfs "$TMP/part/share" || fail "could not mount a second read-only tmpfs"
  expect_refused "$TMP/part"
  [ ! -e "$TMP/part/bin" ] || fail "make install copied bin/ before finding share/ unwritable (a partial install)"
  umount "$TMP/part/share"
  ro_note="read-only prefix and read-only share/ refused"
else
  echo "note: cannot mount a read-only tmpfs here (no permission): the unwritable-prefix check is skipped"
  ro_note="unwritable prefix not checked (no mount)"
fi

pass "make install: tree, DESTDIR, installed hetrain trains elsewhere; module file $lua_note; $version_note; $ro_note"
