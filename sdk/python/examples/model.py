"""An agent that answers with a language model, in about forty lines: any
OpenAI-compatible server (OpenAI, Azure OpenAI, Ollama, vLLM, ...). The SDK
renders each run's context so that only the request of the person who asked
reads as instructions. The answer streams into the run's live box while the
model writes, and the model may call the HTTP tools of the file BOTHY_TOOLS
names, the consequential ones behind the SDK's approval gate. The model reads
the text of attached files as data and may attach a file to its answer.

    BOTHY_SERVER=https://chat.example.com BOTHY_AGENT_TOKEN=bothy_a_... BOTHY_TOOLS=tools.yaml \\
    BOTHY_MODEL_BASE_URL=http://localhost:11434/v1 BOTHY_MODEL_NAME=llama3.2 python3 model.py
"""

import argparse
import logging

import bothy_agent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--once", action="store_true", help="stop after the first run")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)

    # BOTHY_MODEL_BASE_URL, BOTHY_MODEL_API_KEY and BOTHY_MODEL_NAME say which
    # model; stream=True sends the answer to the live box piece by piece.
    # attach_file lets the model attach a file to its answer (files_out).
    tools = [*bothy_agent.tools_from_env(), bothy_agent.attach_file_tool()]
    model = bothy_agent.OpenAIModel(bothy_agent.ModelConfig.from_env(stream=True, tools=tools))

    async def handle(task: bothy_agent.Task) -> None:
        """Asks the model with the run's prompt and the texts of its files (data,
        which lowers the in-play trust); its error fails the run."""
        await task.answer(await model.answer(await task.prompt_with_files()))

    cfg = bothy_agent.Config.from_env(once=args.once, live=True)
    bothy_agent.run(cfg, handle)


if __name__ == "__main__":
    main()
