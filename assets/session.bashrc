# rebench session shell. Loaded instead of ~/.bashrc (which it sources first).
# Everything typed and printed here is recorded.
if [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc"; fi

# The participant's commands; they talk to the runner with this session's token.
alias score='rebench task score'
alias status='rebench task status'
alias log='rebench task log'
alias note='rebench task note'
alias pause='rebench task pause'
alias resume='rebench task resume'
alias submit='rebench task submit'
alias instructions='rebench task instructions'

PS1='[rebench ${REBENCH_SESSION}] \w \$ '
