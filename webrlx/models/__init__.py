"""Models built with the webrlx API (minilm, smollm2, digits) and the loaders they read
(safetensors, gguf, tokenizers, chat templates). Import each module on its own:
`from webrlx.models import minilm`."""
