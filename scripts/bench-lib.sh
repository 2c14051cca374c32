# Shared by the benchmark scripts (sourced, not run): file generation and the
# CPU/memory sampler. Needs $work, and for `measure` $warm, $windows and $window.

gen() {  # gen NAME SECONDS CODEC-ARGS...
  local name=$1 secs=$2; shift 2
  [ -f "$work/music/$name" ] && return
  ffmpeg -nostdin -v error -y -f lavfi -i "sine=f=440:r=44100:d=$secs" \
    -f lavfi -i "aevalsrc='0.4*sin(2*PI*(200*mod(t,60)+50*mod(t,60)*mod(t,60)))':s=44100:d=$secs" \
    -filter_complex "[0][1]amerge=inputs=2" "$@" "$work/music/$name.tmp.${name##*.}"
  mv "$work/music/$name.tmp.${name##*.}" "$work/music/$name"
}

# sample PID SECONDS: prints "cpu_percent rss_anon_kb vm_rss_kb" for one window.
sample() {
  python3 - "$1" "$2" <<'EOF'
import os, sys, time
pid, secs = sys.argv[1], float(sys.argv[2])
def cpu():
    # Sum of every thread's on-CPU time in nanoseconds (schedstat), far finer than
    # /proc/PID/stat's 10 ms ticks.
    total = 0
    for t in os.listdir(f'/proc/{pid}/task'):
        try:
            total += int(open(f'/proc/{pid}/task/{t}/schedstat').read().split()[0])
        except OSError:
            pass
    return total
def mem():
    d = {}
    for l in open(f'/proc/{pid}/status'):
        k, v = l.split(':', 1)
        d[k] = v.strip()
    return int(d['RssAnon'].split()[0]), int(d['VmRSS'].split()[0]), int(d['VmHWM'].split()[0])
c0, t0 = cpu(), time.monotonic()
time.sleep(secs)
c1, t1 = cpu(), time.monotonic()
anon, rss, hwm = mem()
print(f"{100.0 * (c1 - c0) / 1e9 / (t1 - t0):.3f} {anon} {rss} {hwm}")
EOF
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# measure PID [WINDOW] → "cpu anon rss hwm" (medians of the windows, hwm = last)
measure() {
  local pid=$1 w=${2:-$window} cpus=() anons=() rsss=() hwm=0
  sleep $warm
  for _ in $(seq 1 $windows); do
    read -r c a r h < <(sample "$pid" "$w")
    cpus+=("$c"); anons+=("$a"); rsss+=("$r"); hwm=$h
  done
  echo "$(printf '%s\n' "${cpus[@]}" | median) $(printf '%s\n' "${anons[@]}" | median) $(printf '%s\n' "${rsss[@]}" | median) $hwm"
}

# wakeups PID SECONDS → context switches per second, all threads.
wakeups() {
  python3 - "$1" "$2" <<'EOF'
import os, sys, time
pid, secs = sys.argv[1], float(sys.argv[2])
def switches():
    n = 0
    for t in os.listdir(f'/proc/{pid}/task'):
        try:
            for l in open(f'/proc/{pid}/task/{t}/status'):
                if l.startswith(('voluntary_ctxt_switches', 'nonvoluntary_ctxt_switches')):
                    n += int(l.split()[1])
        except OSError:
            pass
    return n
a, t = switches(), time.monotonic()
time.sleep(secs)
print(f"{(switches() - a) / (time.monotonic() - t):.1f}")
EOF
}
