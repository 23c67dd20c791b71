"""Adapters that plug memstrata into agent frameworks, one module per framework.

Each adapter is a thin layer over a ``MemoryOS`` passed in (the first argument of every
constructor; everything else by keyword: ``user_id=``, ``session_id=``, ``cube_id=``): it maps
the framework's calls onto ``MemoryOS`` calls and decides no rule of its own (grants, limits,
validation and states are the core's).  The adapters built on ``mapping.Backend`` take an
``AsyncMemoryOS``, a ``Client`` or an ``AsyncClient`` as well (with a client, the acting user is
the API key's owner).  The framework itself is an extra, imported only by its
own module, so ``import memstrata`` never needs one:

=======================  =============================================  =====================
module                   classes                                        extra
=======================  =============================================  =====================
``langgraph``            ``MemstrataStore`` (``BaseStore``),            ``memstrata[langgraph]``
                         ``MemstrataSaver`` (``BaseCheckpointSaver``)
``langchain``            ``MemstrataChatMessageHistory``                ``memstrata[langchain]``
                         (``BaseChatMessageHistory``)
``openai_agents``        ``MemstrataSession`` (the Agents SDK's         ``memstrata[openai-agents]``
                         ``Session``), ``memory_tools``
``llamaindex``           ``MemstrataMemoryBlock`` (``BaseMemoryBlock``)  ``memstrata[llamaindex]``
``autogen``              ``MemstrataMemory`` (``Memory``)               ``memstrata[autogen]``
``adk``                  ``MemstrataMemoryService``                     ``memstrata[adk]``
                         (``BaseMemoryService``)
``pydantic_ai``          ``MemstrataMemory`` (a capability)             ``memstrata[pydantic-ai]``
``crewai``               ``MemstrataStorage`` (``StorageBackend``)      ``memstrata[crewai]`` (an
                                                                        environment of its own)
=======================  =============================================  =====================

``mapping`` is what the adapters share: how a framework's user, session, thread or namespace
becomes a memstrata user, cube, session id or metadata (docs/integrations/), and ``Backend``,
the one object an adapter calls whatever memory it was given.
"""
