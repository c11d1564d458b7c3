"""Dynamic shovels, as RabbitMQ's shovel plugin defines them: runtime
parameters of component ``shovel`` (:mod:`.definition`)."""
