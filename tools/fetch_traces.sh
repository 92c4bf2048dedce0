#!/usr/bin/env bash
# Fetch the full public traces whose first rows simkv bundles under traces/ (see
# traces/README.md for their licences and attribution) into reports/traces/ (git-ignored):
#
#   tools/fetch_traces.sh            # all of them
#   tools/fetch_traces.sh mooncake   # Mooncake FAST'25: conversation, tool-agent (Apache-2.0)
#   tools/fetch_traces.sh bailian    # Qwen-Bailian usage traces, coder and thinking (Apache-2.0)
#
# Then, e.g.: simkv cache-curve reports/traces/toolagent_trace.jsonl --model llama-3-8b
# Files kept in Git LFS come from media.githubusercontent.com when raw.githubusercontent.com
# answers with an LFS pointer.
set -euo pipefail

OUT="${OUT:-reports/traces}"
MOONCAKE="kvcache-ai/Mooncake/main/FAST25-release/traces"
BAILIAN="alibaba-edu/qwen-bailian-usagetraces-anon/main"

fetch() {  # fetch OWNER/REPO/REF/PATH: into $OUT/<file name>, resolving LFS pointers
    local src="$1" dest="$OUT/${1##*/}"
    curl -fL --retry 3 -o "$dest" "https://raw.githubusercontent.com/$src"
    if head -c 40 "$dest" | grep -q '^version https://git-lfs'; then
        curl -fL --retry 3 -o "$dest" "https://media.githubusercontent.com/media/$src"
    fi
    echo "wrote $dest ($(wc -l < "$dest") lines)"
}

mkdir -p "$OUT"
case "${1:-all}" in
    mooncake|all)
        fetch "$MOONCAKE/conversation_trace.jsonl"
        fetch "$MOONCAKE/toolagent_trace.jsonl" ;;&
    bailian|all)
        fetch "$BAILIAN/qwen_coder_blksz_16.jsonl"
        fetch "$BAILIAN/qwen_thinking_blksz_16.jsonl" ;;
    mooncake) ;;
    *) echo "usage: $0 [all|mooncake|bailian]" >&2; exit 2 ;;
esac
