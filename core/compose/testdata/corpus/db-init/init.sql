CREATE TABLE t (id int);
