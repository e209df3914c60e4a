/*
 * main.c - the rkmojo command-line entry point: dispatches to the
 * subcommands (one file each, cmd_<name>.c). Only this file calls exit().
 *
 * Every subcommand parses its options with getopt_long over tables
 * (opts.c), in GNU order: positional arguments may come before, between or
 * after the options, and -- ends the options. -h/--help prints the usage
 * on stdout.
 *
 * Exit status: 0 success; 1 a runtime error (a file that cannot be read or
 * written, a model that fails to open or to run); 2 a usage error (unknown
 * command or option, a missing or bad value, missing arguments), with one
 * message on stderr.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "rkmojo.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"synth", rkm_cmd_synth, "write a synthetic GGUF checkpoint (random weights, real shapes)"},
    {"convert", rkm_cmd_convert, "convert a GGUF file or Hugging Face directory to .rkmojo"},
    {"pull", rkm_cmd_pull, "install a GGUF from a URL or hf://ORG/REPO:FILE, converting as it downloads"},
    {"inspect", rkm_cmd_inspect, "describe a .rkmojo model; --verify checks every checksum"},
    {"list", rkm_cmd_list, "the models of a models directory (--models-dir, $RKMOJO_MODELS)"},
    {"show", rkm_cmd_show, "a model of the models directory: architecture, size, sampling"},
    {"rm", rkm_cmd_rm, "delete a model from the models directory"},
    {"ps", rkm_cmd_ps, "the models a running `rkmojo serve` holds (--url, $RKMOJO_HOST)"},
    {"tokenize", rkm_cmd_tokenize, "text to token ids and pieces (-m MODEL | --vocab FILE)"},
    {"detokenize", rkm_cmd_detokenize, "token ids to text"},
    {"run", rkm_cmd_run, "generate text from a prompt (or token ids)"},
    {"perplexity", rkm_cmd_perplexity, "perplexity of a text or id sequence (teacher forcing)"},
    {"chat", rkm_cmd_chat, "interactive chat: a model here (-m), or a running server (--url)"},
    {"demo", rkm_cmd_demo, "synthesize a small MoE model, convert it and generate (noise)"},
    {"bench", rkm_cmd_bench, "prefill/decode speed, expert hit rate, bytes read, IO wait, peak RSS"},
    {"plan", rkm_cmd_plan, "what a model will do on a device: memory plan, hit rate, bytes per token, decode bound"},
    {"trace-sim", rkm_cmd_trace_sim, "replay a routing trace under LRU, LFU and Belady; expert-cache hit rates"},
    {"template", rkm_cmd_template, "render a chat template for a conversation (debugging aid)"},
    {"serve", rkm_cmd_serve, "OpenAI- and Ollama-compatible HTTP server (docs/SERVER.md)"},
    {"doctor", rkm_cmd_doctor, "CPU kernels, Rockchip NPU driver/runtime/chip, and whether the NPU backend is used"},
};

static void usage(FILE *f)
{
    fprintf(f, "rkmojo %s - MoE inference with streamed experts\n\nusage: rkmojo COMMAND [options]\n\ncommands:\n",
            RKM_VERSION_STRING);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'rkmojo COMMAND --help' describes a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("rkmojo %s\n", RKM_VERSION_STRING);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "rkmojo: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
