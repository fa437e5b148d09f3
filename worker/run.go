package main

// runner is what runWorkers needs of the investigation task queue's
// worker, stopper of the others (a worker.Worker is both).
type runner interface{ Run(interruptCh <-chan any) error }

type stopper interface{ Stop() }

// runWorkers runs main until interrupt, then stops the others.
func runWorkers(interrupt <-chan any, main runner, others []stopper) error {
	err := main.Run(interrupt)
	for i := len(others) - 1; i >= 0; i-- {
		others[i].Stop()
	}
	return err
}

// stopAll stops ws, each once (a worker.Worker's Stop returns at once
// when it has stopped already).
func stopAll(ws []stopper) {
	for i := len(ws) - 1; i >= 0; i-- {
		ws[i].Stop()
	}
}
