#!/usr/bin/env bash
# probe.sh COMPILER HEADER "CFLAGS" "LIBS" — prints 1 when a program including HEADER compiles and links.
printf '#include <%s>\nint main(){return 0;}\n' "$2" | $1 -x c++ $3 - -o /dev/null $4 >/dev/null 2>&1 && echo 1
