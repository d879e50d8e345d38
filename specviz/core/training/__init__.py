"""Training an EAGLE-3 head for a target from text, with the target's own soft labels
computed online (`specviz train-head`).

Each step runs the target's no-grad prefill over a batch of text for the aux layers' states
and its distribution over the draft vocabulary, then trains the head on them with
speculators' recipe (training-time test, KL to the target; core.drafters.eagle3.fit's
passes). Nothing but token ids is kept: no hidden states on disk.

config: the run's settings and its resumable state; sources: text, chats and questions
read with bounds; examples: tokens, loss masks, the draft vocabulary, the batch stream;
teacher: the target's prefill; objective: the loss and the held-out acceptance; checkpoint,
export: what is written; loop: the training loop.
"""
