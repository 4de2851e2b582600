# bash completion for exec-client (installed as
# share/bash-completion/completions/exec-client). Commands, fs subcommands and each
# one's options as `exec-client COMMAND --help` lists them; local files where a local
# path goes (fs put's sources, fs get's target). Remote paths are not completed: that
# would need a connection per Tab.
_exec_client()
{
    local cur prev words cword
    _init_completion || return
    local globals="--url --token --token-file --ca-file --remote --environment-id
        --environment --environments --liveness-ms --timeout-ms --connect-timeout
        --reconnect-ms --keepalive-ms --verbose --version --help"
    local cmds="run shell fs rpc sessions ps attach forward help"
    case $prev in
        --ca-file|--token-file|--environments) _filedir; return ;;
        --url) COMPREPLY=($(compgen -W "ws:// wss://" -- "$cur")); compopt -o nospace; return ;;
    esac
    local i cmd="" sub="" nops=0
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            --url|--token|--token-file|--ca-file|--remote|--environment-id|--environment|\
            --environments|--liveness-ms|--timeout-ms|--connect-timeout|--reconnect-ms|\
            --keepalive-ms) [[ -z $cmd ]] && ((i++)) ;;
            -*) ;;
            *) if [[ -z $cmd ]]; then cmd=${words[i]}
               elif [[ $cmd == fs && -z $sub ]]; then sub=${words[i]}
               else ((nops++)); fi ;;
        esac
    done
    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "$globals $cmds" -- "$cur")); return
    fi
    case $cmd in
        fs)
            if [[ -z $sub ]]; then
                COMPREPLY=($(compgen -W "cat get put ls stat rm cp mkdir walk --help" -- "$cur"))
                return
            fi
            case $sub in
                get) COMPREPLY=($(compgen -W "-r -p -q --help" -- "$cur"))
                     [[ $cur != -* && $nops -ge 1 ]] && _filedir ;;
                put) COMPREPLY=($(compgen -W "-r -p -q --help" -- "$cur"))
                     [[ $cur != -* ]] && _filedir ;;
                ls) COMPREPLY=($(compgen -W "-l -a --help" -- "$cur")) ;;
                rm) COMPREPLY=($(compgen -W "-r -f --help" -- "$cur")) ;;
                cp) COMPREPLY=($(compgen -W "-r --help" -- "$cur")) ;;
                mkdir) COMPREPLY=($(compgen -W "-p --help" -- "$cur")) ;;
                walk) COMPREPLY=($(compgen -W "--max-depth --help" -- "$cur")) ;;
                *) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
            esac ;;
        run) COMPREPLY=($(compgen -W "--tty -n -d --keep --cwd --env --help" -- "$cur")) ;;
        shell) COMPREPLY=($(compgen -W "--cwd --env --help" -- "$cur")) ;;
        rpc) COMPREPLY=($(compgen -W "--raw --help" -- "$cur")) ;;
        sessions) COMPREPLY=($(compgen -W "--json --end --help" -- "$cur")) ;;
        ps) COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
        attach) COMPREPLY=($(compgen -W "--detach-key --help" -- "$cur")) ;;
        forward) COMPREPLY=($(compgen -W "-L --help" -- "$cur")) ;;
        help) [[ $nops -eq 0 ]] && COMPREPLY=($(compgen -W "$cmds" -- "$cur")) ;;
    esac
}
complete -F _exec_client exec-client
