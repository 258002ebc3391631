# rebench session shell: loaded instead of ~/.bashrc. Everything typed and
# printed here is recorded.
#
# The operator's ~/.bashrc is loaded only when asked for (the operator's
# config `operator_bashrc = true`, or the environment's `[sandbox]
# operator_bashrc`): a slow or broken one must not leave a participant
# without a prompt.
if [ "${REBENCH_OPERATOR_BASHRC:-}" = 1 ] && [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc"; fi
unset REBENCH_OPERATOR_BASHRC

# The participant's commands; they talk to the runner with this session's token.
alias score='rebench task score'
alias status='rebench task status'
alias log='rebench task log'
alias note='rebench task note'
alias pause='rebench task pause'
alias resume='rebench task resume'
alias submit='rebench task submit'
alias instructions='rebench task instructions'
alias ls='ls --color=auto'
alias grep='grep --color=auto'

# The shell starts in the workspace: `cd "$WORKSPACE"` comes back, and the
# prompt names it `workspace` instead of its long path.
export WORKSPACE="${WORKSPACE:-$PWD}"
__rebench_where() {
    case $PWD in
        "$WORKSPACE") printf 'workspace' ;;
        "$WORKSPACE"/*) printf 'workspace/%s' "${PWD#"$WORKSPACE"/}" ;;
        "$HOME") printf '~' ;;
        "$HOME"/*) printf '~/%s' "${PWD#"$HOME"/}" ;;
        *) printf '%s' "$PWD" ;;
    esac
}
PS1='[rebench ${REBENCH_SESSION}] $(__rebench_where) \$ '
