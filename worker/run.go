package main

import "sync"

// runner is what runWorkers needs of the investigation task queue's
// worker, stopper of the others (a worker.Worker is both).
type runner interface {
	Run(interruptCh <-chan any) error
}

type stopper interface{ Stop() }

// runWorkers runs main until interrupt, or until it stops by itself (a
// fatal error), and stops every worker at once: each Stop drains for up to
// --stop-timeout, so stopping them one after another took a multiple of it,
// while the provider and admission workers kept taking tasks during main's
// drain.
func runWorkers(interrupt <-chan any, main runner, others []stopper) error {
	stop := make(chan any, 1)
	ran := make(chan error, 1)
	go func() { ran <- main.Run(stop) }()
	select {
	case s := <-interrupt:
		stop <- s // main stops in its Run, beside the others
		stopAll(others)
		return <-ran
	case err := <-ran:
		stopAll(others)
		return err
	}
}

// stopAll stops ws together and returns when all have stopped (a
// worker.Worker's Stop returns at once when it has stopped already).
func stopAll(ws []stopper) {
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(w.Stop)
	}
	wg.Wait()
}
