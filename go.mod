module github.com/evtctl/evtctl

go 1.26
