# The MPS daemon for a probe's runs, sourced by the call scripts: mps_start
# starts it (and stops it when the script ends, also when the call is cut
# short), mps_stop stops it and says whether any of its processes stayed.
# Both log to $L.
mps_start() {
  nvidia-cuda-mps-control -d >> $L 2>&1; echo "MPS start rc=$?" >> $L
  trap 'echo quit | nvidia-cuda-mps-control' EXIT
  sleep 1
}
mps_stop() {
  echo quit | nvidia-cuda-mps-control; trap - EXIT; sleep 2
  echo "## MPS stopped: $(pgrep -c nvidia-cuda-mps || true) MPS processes left" >> $L
}
