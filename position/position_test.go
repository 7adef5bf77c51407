package position

import (
	"sync"
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestPositionsOnlyMoveForward(t *testing.T) {
	p := New(100)
	if p.Received() != 100 || p.Applied() != 100 || p.Reported() != 100 || !p.Idle() {
		t.Fatalf("start: %v %v %v idle=%v", p.Received(), p.Applied(), p.Reported(), p.Idle())
	}
	if !p.AdvanceReceived(200) || p.AdvanceReceived(150) || p.Received() != 200 {
		t.Errorf("received = %v after 200 then 150", p.Received())
	}
	if p.Idle() {
		t.Error("idle with a received transaction not applied")
	}
	if !p.AdvanceApplied(200) || !p.Idle() {
		t.Error("not idle once everything received is applied")
	}
	if p.AdvanceReported(90) || p.Reported() != 100 {
		t.Errorf("reported moved back to %v", p.Reported())
	}
}

func TestAdvanceIsSafeConcurrently(t *testing.T) {
	p := New(0)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 10000; i++ {
				p.AdvanceApplied(pglogrepl.LSN(i*8 + g))
			}
		}(g)
	}
	wg.Wait()
	if p.Applied() != 9999*8+7 {
		t.Errorf("applied = %v, want the largest value", p.Applied())
	}
}
