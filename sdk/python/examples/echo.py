"""An echo agent in forty lines: it answers every run with what the person
asked and the follow-ups they sent, and says how far the context may be
trusted. Run it with the agent's token:

    BOTHY_SERVER=https://chat.example.com BOTHY_AGENT_TOKEN=bothy_a_... python3 echo.py
"""

import argparse
import logging

import bothy_agent


async def handle(task: bothy_agent.Task) -> None:
    """Answers one run: the request, then each follow-up not shown before."""
    c = task.context
    reply = f"You asked: {c.trigger_message.content_md!r}"
    for f in task.follow_ups:
        reply += f"\nThen: {f.content_md!r}"
    reply += f"\n(least trusted element: {c.lowest})"
    await task.answer(reply)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--once", action="store_true", help="stop after the first run")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    # BOTHY_SERVER and BOTHY_AGENT_TOKEN say where and who.
    bothy_agent.run(bothy_agent.Config.from_env(once=args.once), handle)


if __name__ == "__main__":
    main()
