#!/usr/bin/env bash
# k3host chat driven as a person would: in a tmux terminal of a fixed size, keys typed with
# send-keys, the screen read with capture-pane (every wait polls it, with a deadline).
#   A (resident tiny model): a message gets an answer and the status line; /think off;
#     typed <|open|> stays text (history ids); Ctrl-C at the prompt clears the line; /save;
#     /quit exits 0.
#   B (--resume, the same model streaming through a throttled storage, so every forward
#     takes seconds): the conversation and its model state come back, the next turn feeds
#     only its new ids (status line against /stats); Ctrl-C during an answer stops it, keeps
#     it closed in the history, and the prompt goes on; Ctrl-D exits 0.
#   C (a fresh conversation, streaming and throttled): Ctrl-C while the answer's tokens
#     stream stops it, and the stopped answer is kept, closed.
#   D (a context of 320 tokens): long messages fill it, the oldest turn is dropped and the
#     screen names it; the chat goes on.
# Exit 77 (skipped) without tmux.
#   cli_chat_tmux.sh <k3host> <source dir> <scratch dir>
set -u
tries=0
EXE=$1 SRC=$2 WORK=$3
command -v tmux >/dev/null || { echo "SKIP: tmux is not installed (apt-get install tmux)"; exit 77; }

rm -rf "$WORK" && mkdir -p "$WORK"
SOCK="k3chat-test-$$"
T() { tmux -L "$SOCK" -f /dev/null "$@"; }
cleanup() { T kill-server >/dev/null 2>&1; }
trap cleanup EXIT
pane() { T capture-pane -p -J -S - -t chat 2>/dev/null; }
fail() {
  echo "FAIL: $*"
  echo "--- screen:"
  pane
  exit 1
}
# wait_count REGEX N SECONDS WHAT: until the screen has at least N lines matching REGEX.
wait_count() {
  local end=$((SECONDS + $3))
  while ((SECONDS < end)); do
    (($(pane | grep -Ec -- "$1") >= $2)) && return 0
    sleep 0.2
  done
  fail "timed out after $3 s waiting for $4 (${2}x /$1/)"
}
count() { pane | grep -Ec -- "$1"; }
# wait_prompt SECONDS WHAT: until the last line on the screen is an empty prompt.
wait_prompt() {
  local end=$((SECONDS + $1))
  while ((SECONDS < end)); do
    [[ $(pane | grep -v '^$' | tail -n 1) == "> " ]] && return 0
    sleep 0.2
  done
  fail "timed out after $1 s waiting for $2 (an empty prompt on the last line)"
}
type_line() { T send-keys -t chat -l -- "$1" && T send-keys -t chat Enter; }
# The server is started once and kept when its sessions end (exit-empty off): a session killed
# just before the next one starts would otherwise race the server's own exit. tmux's startup
# can still lose its new server ("server exited unexpectedly", seen on a loaded CI machine),
# so a session that cannot start is tried three times before the test fails.
server() {
  local try err
  for try in 1 2 3; do
    err=$(T start-server \; set-option -g exit-empty off 2>&1) && return 0
    echo "tmux start-server, try $try: $err"
    sleep 1
  done
  fail "tmux cannot start a server: $err"
}
start() {  # start ARGS...: k3host chat in a new tmux session of 200x50
  local cmd try err
  printf -v cmd '%q ' "$EXE" chat "$@"
  for try in 1 2 3; do
    server
    T kill-session -t chat >/dev/null 2>&1  # the last run's, or a half-made one of a failed try
    err=$(T new-session -d -s chat -x 200 -y 50 \
            "cd $(printf %q "$WORK") && $cmd; echo EXIT=\$?; sleep 600" 2>&1) && return 0
    echo "tmux new-session, try $try: $err"
    sleep 1
  done
  fail "tmux cannot start a session: $err"
}

"$EXE" make-model -g tiny -o "$WORK/model" >/dev/null 2>&1 || fail "make-model failed"
common=(--config "$SRC/presets/laptop.yaml" --set "model.path=$WORK/model" --set threads=1
        --set memory.context=1024)
STATUS='^-- [0-9]+ tokens, [0-9.]+ tokens/s \| fed [0-9]+ tokens, prefill [0-9.]+ s \| (experts resident|expert hit rate [0-9.]+% \([0-9]+/[0-9]+\)) \| I/O wait [0-9.]+ s \| context [0-9]+/1024$'
OPEN_ID=$(printf '<|open|>' | "$EXE" tokenize "${common[@]}" --special 2>/dev/null)
[[ $OPEN_ID =~ ^[0-9]+$ ]] || fail "cannot look up the id of <|open|> ($OPEN_ID)"

# --- A ---------------------------------------------------------------------------------------
start "${common[@]}"
wait_count '^k3host chat: ' 1 60 "the banner"
wait_prompt 10 "the first prompt"
type_line "Hello there"
wait_count "$STATUS" 1 60 "the status line of the first answer"
pane | grep -q -- '-- .*experts resident' || fail "the tiny model under laptop budgets should be resident"
wait_prompt 10 "the prompt after the first answer"

type_line "/think off"
wait_count '^\[thinking off from the next answer\]' 1 10 "/think off"
type_line "Second question"
wait_count "$STATUS" 2 60 "the status line of the second answer"

type_line "<|open|> is typed here"
wait_count "$STATUS" 3 60 "the status line of the third answer"

# Ctrl-C at the prompt drops what is typed; the next command runs on its own.
# Ctrl-C only once the draft is on the screen: sent earlier (a loaded machine), it could
# reach the terminal before libedit has read the draft's characters.
T send-keys -t chat -l -- "a draft that is never sent"
wait_count '^> a draft that is never sent$' 1 10 "the typed draft"
T send-keys -t chat C-c
wait_count '^> a draft that is never sent\^C$' 1 10 "the cleared line"
type_line "/stats"
wait_count '^conversation: 6 messages, [0-9]+ tokens; model state: [0-9]+ tokens' 1 10 "/stats after three answers"
(($(count 'draft that is never sent') == 1)) || fail "the cleared draft was sent or echoed again"

type_line "/save $WORK/conv.jsonl"
wait_count "^\[saved $WORK/conv.jsonl and $WORK/conv.jsonl.state\]" 1 20 "/save"
type_line "/quit"
wait_count '^EXIT=0$' 1 30 "exit 0 after /quit"

# The history: one record per message (the effort message of thinking-on first), /think off
# recorded, the typed control-token text encoded as text (one <|open|>: the message header).
H="$WORK/conv.jsonl"
[[ -s "$H.state" ]] || fail "no model state next to the history"
(($(wc -l < "$H") == 7)) || fail "expected 7 records (1 internal + 6 messages), got $(wc -l < "$H")"
grep -c '"role":"assistant"' "$H" | grep -qx 3 || fail "expected 3 assistant records"
tail -n 1 "$H" | grep -q '"thinking":false' || fail "the answer after /think off is not recorded with thinking off"
sed -n 2p "$H" | grep -q '"internal":true' && fail "only the first record is the internal effort message"
head -n 1 "$H" | grep -q '"internal":true' || fail "the first record should be the thinking-effort message"
user=$(grep -F '"content":"<|open|> is typed here"' "$H") || fail "no user record with the typed <|open|>"
ids=$(sed -E 's/.*"ids":\[([0-9,]*)\].*/\1/' <<<"$user")
opens=$(tr ',' '\n' <<<"$ids" | grep -cx "$OPEN_ID")
((opens == 1)) || fail "the typed <|open|> became a control token: $opens <|open|> ids in $ids"

# --- B ---------------------------------------------------------------------------------------
slow=(--set memory.trunk_gb=0.00005 --set memory.expert_cache_gb=0.00005 --set storage.plugin=throttle
      --set "storage.params={latency_us: 50000}" --set job.prefill_chunk=4)
start "${common[@]}" "${slow[@]}" --resume "$H"
wait_count "^\[loaded $H: 6 messages, [0-9]+ tokens, [0-9]+ of them in the model state\]" 1 120 "the resumed conversation"
loaded=$(pane | grep -E "^\[loaded $H" | tail -n 1)
total=$(sed -E 's/.* messages, ([0-9]+) tokens, ([0-9]+) of them.*/\1/' <<<"$loaded")
instate=$(sed -E 's/.* messages, ([0-9]+) tokens, ([0-9]+) of them.*/\2/' <<<"$loaded")
((instate > 0 && instate <= total)) || fail "the model state was not restored ($instate of $total tokens)"
wait_prompt 10 "the prompt after --resume"
type_line "One more"
wait_count "$STATUS" 1 300 "the status line of the resumed turn"
st=$(pane | grep -E "$STATUS" | tail -n 1)
fed=$(sed -E 's/.*\| fed ([0-9]+) tokens.*/\1/' <<<"$st")
ctx=$(sed -E 's/.*\| context ([0-9]+)\/1024$/\1/' <<<"$st")
gen=$(sed -E 's/^-- ([0-9]+) tokens.*/\1/' <<<"$st")
# Fed: what the state lacked, up to the reply's opening (the stream minus the generated ids
# and any closing ids); never the old turns again.
((fed < instate)) || fail "the resumed turn fed $fed tokens (state held $instate of $total)"
last=$(tail -n 1 "$H")
closing=$(sed -E 's/.*"closing":([0-9]+).*/\1/' <<<"$last")
((fed == ctx - gen - closing - instate)) ||
  fail "fed $fed tokens, expected the $((ctx - gen - closing - instate)) the state lacked (context $ctx, generated $gen, closing $closing, state $instate)"
wait_prompt 10 "the prompt after the resumed turn"

# Ctrl-C while the answer is being worked on (its prefill alone takes several forwards of
# about a second each).
type_line "Tell me a long story"
sleep 3
(($(count "$STATUS") == 1)) || fail "the answer finished before Ctrl-C could stop it"
T send-keys -t chat C-c
wait_count '\[stopped\]' 1 120 "the stopped answer"
wait_count "$STATUS" 2 30 "the status line of the stopped answer"
wait_prompt 10 "the prompt after Ctrl-C"
tail -n 1 "$H" | grep -q '"ending":"interrupted"' || fail "the stopped answer is not in the history as interrupted"
tail -n 1 "$H" | grep -Eq '"closing":[1-9]' || fail "the stopped answer was not closed in the id stream"
type_line "/stats"
wait_count '^conversation: 10 messages' 1 10 "the conversation kept after Ctrl-C"

T send-keys -t chat C-d
wait_count '^EXIT=0$' 1 60 "exit 0 after Ctrl-D"

# --- C ---------------------------------------------------------------------------------------
# Ctrl-C while tokens stream, as soon as an answer shows text (a fresh conversation over the
# throttled storage: a forward takes about a second). The random tiny model soon breaks
# K3's format and ends its answers, so a few first messages may be needed for one that lasts.
start "${common[@]}" --set memory.trunk_gb=0.00005 --set memory.expert_cache_gb=0.00005 \
  --set storage.plugin=throttle --set "storage.params={latency_us: 100000}"
wait_count '^k3host chat: ' 1 120 "the banner"
wait_prompt 10 "the first prompt"
stopped_decoding=0
for msg in "Hello there" "What is the capital of France?" "abc" "Tell me a story"; do
  statuses=$(count "$STATUS")
  type_line "$msg"
  end=$((SECONDS + 120))
  shown=0
  while ((SECONDS < end)); do
    after=$(pane | grep -v '^$' | awk -v m="> $msg" '$0 == m { buf = ""; found = 1; next } found { buf = buf $0 "\n" } END { printf "%s", buf }')
    if [[ -n $after ]]; then
      grep -Eq "$STATUS" <<<"$after" || shown=1
      break
    fi
    sleep 0.1
  done
  if ((shown)); then
    T send-keys -t chat C-c
    wait_count "$STATUS" $((statuses + 1)) 60 "the status line after Ctrl-C during decoding"
    st=$(pane | grep -E "$STATUS" | tail -n 1)
    if pane | grep -v '^$' | tail -n 3 | grep -q '^\[stopped\]$' && [[ ! $st =~ ^--\ 0\ tokens ]]; then
      stopped_decoding=1
      break
    fi
  fi
  wait_count "$STATUS" $((statuses + 1)) 120 "the status line of '$msg'"
  wait_prompt 10 "the prompt after '$msg'"
  type_line "/reset"
  wait_count '^\[new conversation\]' $((tries += 1)) 10 "/reset"
done
((stopped_decoding)) || fail "no answer lasted long enough to be stopped while its tokens streamed"
wait_prompt 10 "the prompt after Ctrl-C during decoding"
type_line "/save $WORK/c.jsonl"
wait_count "^\[saved $WORK/c.jsonl" 1 20 "/save after Ctrl-C during decoding"
tail -n 1 "$WORK/c.jsonl" | grep -q '"ending":"interrupted"' || fail "the answer stopped while streaming is not recorded as interrupted"
tail -n 1 "$WORK/c.jsonl" | grep -Eq '"closing":[1-9]' || fail "the answer stopped while streaming was not closed"
T send-keys -t chat C-d
wait_count '^EXIT=0$' 1 60 "exit 0 after Ctrl-D"

# --- D ---------------------------------------------------------------------------------------
# A small context filling up (resident, thinking off, short answers, long messages): the
# oldest turn is dropped, the screen says which, and the chat goes on.
start "${common[@]}" --set memory.context=320 --max-tokens 24 --no-think
wait_count '^k3host chat: .* \| thinking off \| answers up to 24 tokens \|' 1 60 "the banner with the answer limit"
wait_prompt 10 "the first prompt"
SMALL='^-- [0-9]+ tokens, .* \| context [0-9]+/320$'
long="tell me more about the long and winding road that leads to your door, and the rest of it"
for i in 1 2 3 4 5; do
  type_line "$i: $long"
  wait_count "$SMALL" "$i" 60 "the status line of message $i"
  wait_prompt 10 "the prompt after message $i"
done
(($(count '^\[the context is full: dropped the oldest turn \(2 messages, [0-9]+ tokens: "1: tell me') == 1)) ||
  fail "the first drop does not name the first turn"
(($(count 'fills the context') == 0)) || fail "a message was refused instead of dropping old turns"
T send-keys -t chat C-d
wait_count '^EXIT=0$' 1 60 "exit 0 after Ctrl-D"
echo "ok"
